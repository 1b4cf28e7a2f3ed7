package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/triggers"
)

// maxTextBytes bounds what a json webhook's template renders.
const maxTextBytes = 16 << 10

// build is the work of a request's body (ID: the notification's identity,
// To: unset) and the labels its routes match.
func build(name string, hook *Webhook, body []byte) (triggers.Work, map[string]string, error) {
	w := triggers.Work{Trigger: "webhook:" + name, Answer: hook.Answer, Skill: hook.Skill}
	if hook.Answer == triggers.AnswerAgent {
		w.Prompt = hook.Prompt
	}
	if hook.Kind == KindJSON {
		return buildJSON(w, hook, body)
	}
	n, err := decodeAlerts(hook.Kind, body)
	if err != nil {
		return w, nil, err
	}
	w.ID, w.Group, w.Resolved = n.Identity(), n.GroupKey, n.Status == StatusResolved
	// The root of the group's thread shows the group's latest state: the
	// gateway edits it to this rendering when the group is resolved, or
	// fires again after it was.
	w.Text = renderAlerts(n)
	w.RootText = w.Text
	if hook.Answer == triggers.AnswerAgent {
		w.Data = alertData(n)
	}
	return w, n.labels(), nil
}

// buildJSON renders any JSON body with the webhook's template.
func buildJSON(w triggers.Work, hook *Webhook, body []byte) (triggers.Work, map[string]string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return w, nil, fmt.Errorf("not JSON: %w", err)
	}
	var out bytes.Buffer
	if err := hook.tmpl.Execute(&limitWriter{w: &out, n: maxTextBytes}, v); err != nil {
		return w, nil, fmt.Errorf("the text template failed on this body: %w", err)
	}
	text := strings.TrimSpace(out.String())
	if text == "" {
		return w, nil, errors.New("the text template rendered nothing")
	}
	sum := sha256.Sum256(body)
	w.ID, w.Text = hex.EncodeToString(sum[:16]), untrustedText(text)
	if hook.Answer == triggers.AnswerAgent {
		w.Data = string(body)
	}
	labels := map[string]string{}
	if obj, ok := v.(map[string]any); ok {
		for k, val := range obj {
			if s, ok := val.(string); ok {
				labels[k] = s
			}
		}
	}
	return w, labels, nil
}

// untrustedText neutralises a rendered text line by line, keeping its
// line breaks.
func untrustedText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = untrustedLine(l)
	}
	return strings.Join(lines, "\n")
}

// untrustedLine is untrusted without its length bound.
func untrustedLine(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(len(s), maxValueRunes)
		for n < len(s) && !isBoundary(s[n]) {
			n++
		}
		b.WriteString(strings.TrimSuffix(untrusted(s[:n]), "…"))
		s = s[n:]
	}
	return b.String()
}

// isBoundary reports whether c starts a UTF-8 sequence.
func isBoundary(c byte) bool { return c&0xC0 != 0x80 }

// limitWriter fails a write past n bytes.
type limitWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.w.Len()+len(p) > l.n {
		return 0, errors.New("the rendered text is over 16 KiB")
	}
	return l.w.Write(p)
}
