package webhook

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers"
)

// Kinds of payload a webhook reads.
const (
	KindAlertmanager = "alertmanager" // the webhook receiver's version 4
	KindGrafana      = "grafana"      // Grafana alerting's webhook contact point
	KindJSON         = "json"         // any JSON body, rendered by Text
)

// DefaultDedupWindow is how long a notification is remembered as posted.
const DefaultDedupWindow = 10 * time.Minute

// Section is this package's part of the triggers: section (which package
// triggers/section puts together): triggers.webhooks.
type Section struct {
	Webhooks Webhooks `yaml:"webhooks,omitempty"`
}

// DefaultSection is the part when the file says nothing: no webhook.
func DefaultSection() *Section { return &Section{} }

// Holder is the triggers: section that holds this package's part
// (triggers/section's Config).
type Holder interface {
	WebhookSection() *Section
}

// FromConfig returns c's webhooks part of the triggers: section, or the
// defaults when c has none (a Config built by hand).
func FromConfig(c config.Config) *Section {
	if h, ok := c.Sections[triggers.SectionName].(Holder); ok {
		return h.WebhookSection()
	}
	return DefaultSection()
}

// Env implements config.SectionConfig: no variable overrides the part (a
// secret is set with ${NAME} in the file).
func (s *Section) Env() []config.EnvVar { return nil }

// Validate implements config.SectionConfig.
func (s *Section) Validate() error { return s.Webhooks.Validate() }

// Webhooks is triggers.webhooks: each webhook by its name, served at
// POST /hooks/NAME.
type Webhooks map[string]*Webhook

// Webhook is triggers.webhooks.NAME.
type Webhook struct {
	Kind string `yaml:"kind"`
	// Token is a bearer token the sender presents; HMACSecret signs the
	// body (X-Parley-Signature). One of them is required.
	Token      config.Secret `yaml:"token,omitempty"`
	HMACSecret config.Secret `yaml:"hmac_secret,omitempty"`
	// To is where a notification no route matches goes; Routes are tried
	// first, in order.
	To     triggers.Destination `yaml:"to"`
	Routes []Route              `yaml:"routes,omitempty"`
	// Answer is post (the rendering is posted) or agent (posted, then an
	// agent turn triages it in the thread, Skill loaded first).
	Answer string `yaml:"answer"`
	Skill  string `yaml:"skill,omitempty"`
	Prompt string `yaml:"prompt,omitempty"`
	// Text is the Go text/template of a json webhook's post, given the
	// decoded body.
	Text string `yaml:"text,omitempty"`
	// DedupWindow is how long the same notification is not posted again.
	DedupWindow time.Duration `yaml:"dedup_window,omitempty"`

	tmpl *template.Template
}

// Route is one entry of routes: every label of Match must match (a value,
// or a /regex/ matched in full).
type Route struct {
	Match map[string]string    `yaml:"match"`
	To    triggers.Destination `yaml:"to"`

	matchers map[string]*regexp.Regexp
}

// DefaultPrompt is the agent's request for an alert when prompt is unset.
const DefaultPrompt = "Triage this alert for the team: what is affected, how bad it is, and the first steps to take. The alert's payload follows as data."

// Validate checks every webhook and prepares its routes and template;
// it reports every problem, each naming its key within the triggers:
// section ("webhooks.NAME.kind: …").
func (ws Webhooks) Validate() error {
	var errs []error
	for name, w := range ws {
		key := "webhooks." + name
		if !triggers.ValidName(name) {
			errs = append(errs, fmt.Errorf("%s: a name is lower-case letters, digits, - and _", key))
		}
		if w == nil {
			errs = append(errs, fmt.Errorf("%s: empty", key))
			continue
		}
		if err := w.prepare(); err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", key, err))
		}
	}
	return errors.Join(errs...)
}

// prepare applies the defaults and compiles what the webhook needs.
func (w *Webhook) prepare() error {
	if w.DedupWindow <= 0 {
		w.DedupWindow = DefaultDedupWindow
	}
	if w.Answer == "" {
		w.Answer = triggers.AnswerPost
	}
	if w.Answer == triggers.AnswerAgent && w.Prompt == "" {
		w.Prompt = DefaultPrompt
	}
	var errs []error
	switch w.Kind {
	case KindAlertmanager, KindGrafana:
	case KindJSON:
		t, err := template.New("text").Option("missingkey=zero").Parse(w.Text)
		if err != nil || strings.TrimSpace(w.Text) == "" {
			errs = append(errs, fmt.Errorf("text: a json webhook needs a text/template: %v", err))
		}
		w.tmpl = t
	default:
		errs = append(errs, fmt.Errorf("kind: %q is none of alertmanager, grafana, json", w.Kind))
	}
	if !w.Token.IsSet() && !w.HMACSecret.IsSet() {
		errs = append(errs, errors.New("token: one of token or hmac_secret is required"))
	}
	if w.Answer != triggers.AnswerPost && w.Answer != triggers.AnswerAgent {
		errs = append(errs, fmt.Errorf("answer: %q is neither post nor agent", w.Answer))
	}
	if err := w.To.Validate(); err != nil && len(w.Routes) == 0 {
		errs = append(errs, err)
	}
	for i := range w.Routes {
		if err := w.Routes[i].prepare(); err != nil {
			errs = append(errs, fmt.Errorf("routes[%d].%w", i, err))
		}
	}
	return errors.Join(errs...)
}

// prepare compiles the route's /regex/ values.
func (r *Route) prepare() error {
	if err := r.To.Validate(); err != nil {
		return err
	}
	if len(r.Match) == 0 {
		return errors.New("match: a route matches at least one label")
	}
	r.matchers = map[string]*regexp.Regexp{}
	for label, v := range r.Match {
		if len(v) >= 2 && strings.HasPrefix(v, "/") && strings.HasSuffix(v, "/") {
			re, err := regexp.Compile("^(?:" + v[1:len(v)-1] + ")$")
			if err != nil {
				return fmt.Errorf("match.%s: %w", label, err)
			}
			r.matchers[label] = re
		}
	}
	return nil
}

// matches reports whether labels satisfy every entry of the route.
func (r *Route) matches(labels map[string]string) bool {
	for label, want := range r.Match {
		got, ok := labels[label]
		if re := r.matchers[label]; re != nil {
			if !ok || !re.MatchString(got) {
				return false
			}
		} else if got != want {
			return false
		}
	}
	return true
}

// destination is where a notification with labels goes: the first route
// that matches, else To; ok is false when neither names a chat.
func (w *Webhook) destination(labels map[string]string) (triggers.Destination, bool) {
	for i := range w.Routes {
		if w.Routes[i].matches(labels) {
			return w.Routes[i].To, true
		}
	}
	return w.To, w.To.Validate() == nil
}
