package webhook

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a rendering: a notification of 10,000 alerts is posted as its
// first alerts and a count of the rest.
const (
	maxShownAlerts = 20
	maxValueRunes  = 300
	maxLabels      = 12
	maxDataAlerts  = 50
)

// untrusted neutralises text from the sender (labels, annotations) for a
// chat post: no mention or link markup (<!channel>, <@U1>, [x](y)), no
// envelope look-alike, no line breaks, no more than maxValueRunes.
func untrusted(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxValueRunes {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == '<':
			b.WriteRune('‹')
		case r == '>':
			b.WriteRune('›')
		case r == '[':
			b.WriteRune('⟦')
		case r == ']':
			b.WriteRune('⟧')
		case r == '@':
			b.WriteString("@\u200b")
		case r == '`' || r == '*' || r == '_' || r == '~' || r == '|':
			b.WriteRune('\'')
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteRune(' ')
		case unicode.IsControl(r) || r == utf8.RuneError:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// link is a Markdown link to raw when it is an http(s) URL, else "".
func link(name, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return "[" + name + "](" + strings.NewReplacer("(", "%28", ")", "%29", " ", "%20", "<", "%3C", ">", "%3E").Replace(u.String()) + ")"
}

// renderAlerts is the post of a notification: its status and name, then
// each alert (bounded), with severity, summary, labels, links and times.
func renderAlerts(n *Notification) string {
	var b strings.Builder
	icon := "🔥"
	if n.Status == StatusResolved {
		icon = "✅"
	}
	name := n.CommonLabels["alertname"]
	if name == "" && n.Title != "" {
		name = n.Title
	}
	if name == "" {
		name = n.Alerts[0].Labels["alertname"]
	}
	fmt.Fprintf(&b, "%s **[%s:%d] %s**", icon, strings.ToUpper(n.Status), len(n.Alerts)+n.TruncatedAlerts, untrusted(name))
	if sev := n.CommonLabels["severity"]; sev != "" {
		fmt.Fprintf(&b, " — severity %s", untrusted(sev))
	}
	b.WriteString("\n")
	for i, a := range n.Alerts {
		if i == maxShownAlerts {
			fmt.Fprintf(&b, "…and %d more alerts (%d in all).\n", len(n.Alerts)-i+n.TruncatedAlerts, len(n.Alerts)+n.TruncatedAlerts)
			break
		}
		renderAlert(&b, a)
	}
	if n.TruncatedAlerts > 0 && len(n.Alerts) <= maxShownAlerts {
		fmt.Fprintf(&b, "…and %d more alerts the sender left out.\n", n.TruncatedAlerts)
	}
	return strings.TrimSpace(b.String())
}

// renderAlert writes one alert's lines.
func renderAlert(b *strings.Builder, a Alert) {
	summary := a.Annotations["summary"]
	if summary == "" {
		summary = a.Annotations["description"]
	}
	if summary == "" {
		summary = a.Labels["alertname"]
	}
	fmt.Fprintf(b, "- %s: %s", strings.ToUpper(a.Status), untrusted(summary))
	if sev := a.Labels["severity"]; sev != "" {
		fmt.Fprintf(b, " (severity %s)", untrusted(sev))
	}
	b.WriteString("\n  ")
	b.WriteString(renderLabels(a.Labels))
	if !a.StartsAt.IsZero() {
		fmt.Fprintf(b, "\n  started %s", a.StartsAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if a.Status == StatusResolved && !a.EndsAt.IsZero() {
		fmt.Fprintf(b, ", ended %s", a.EndsAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	var links []string
	for _, l := range []string{link("source", a.GeneratorURL), link("dashboard", a.DashboardURL), link("panel", a.PanelURL),
		link("runbook", a.Annotations["runbook_url"])} {
		if l != "" {
			links = append(links, l)
		}
	}
	if len(links) > 0 {
		b.WriteString("\n  " + strings.Join(links, " · "))
	}
	b.WriteString("\n")
}

// renderLabels is "k=v, …" of labels, sorted, bounded.
func renderLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, min(len(keys), maxLabels+1))
	for i, k := range keys {
		if i == maxLabels {
			parts = append(parts, fmt.Sprintf("+%d more", len(keys)-i))
			break
		}
		parts = append(parts, untrusted(k)+"="+untrusted(labels[k]))
	}
	return strings.Join(parts, ", ")
}

// alertData is the payload an agent turn is given (as untrusted data):
// the notification with at most maxDataAlerts alerts.
func alertData(n *Notification) string {
	cut := *n
	if len(cut.Alerts) > maxDataAlerts {
		cut.TruncatedAlerts += len(cut.Alerts) - maxDataAlerts
		cut.Alerts = cut.Alerts[:maxDataAlerts]
	}
	raw, err := json.MarshalIndent(cut, "", " ")
	if err != nil {
		return ""
	}
	return string(raw)
}
