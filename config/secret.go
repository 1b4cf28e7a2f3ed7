package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// Redacted is what a Secret prints instead of its value.
const Redacted = "<secret>"

// Secret is a credential read from the file or the environment: an API
// key, a bot token, a signing secret. Every way Go prints a value — fmt
// (String, GoString and every verb through Format), log/slog (LogValue),
// YAML and JSON — shows Redacted instead of it, so a Secret can sit in a
// config that `parley config check` prints, in a log attribute or in an
// error without leaking. An empty Secret prints as the empty string, so an
// operator can still see that it is not set.
//
// Reveal is the one way to read the value; grep for it to find every place
// a credential leaves the process.
//
// A new credential field only needs this type: config check, the logs and
// the secrets test find it by its type.
type Secret string

// Reveal returns the secret's value, for the one call that sends it to the
// platform it belongs to.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s != "" }

func (s Secret) redacted() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String implements fmt.Stringer.
func (s Secret) String() string { return s.redacted() }

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.redacted()) }

// Format implements fmt.Formatter, so that no verb (%x, %q, %d …) prints
// the value either.
func (s Secret) Format(f fmt.State, verb rune) { formatShown(f, verb, s.redacted()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// MarshalYAML implements yaml.Marshaler: `parley config check` shows
// Redacted for a set secret.
func (s Secret) MarshalYAML() (any, error) { return s.redacted(), nil }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.redacted()) }

// SecretURL is a URL that may carry a password (REDIS_URL). It prints with
// the password replaced by "xxxxx" — the user, host and options stay
// readable, since they are what an operator checks — and Reveal returns it
// whole.
type SecretURL string

// Reveal returns the URL with its password, for the one call that dials.
func (u SecretURL) Reveal() string { return string(u) }

func (u SecretURL) redacted() string { return MaskURL(string(u)) }

// maskedValue replaces a password in a URL: short enough to keep the URL
// readable, never a credential.
const maskedValue = "xxxxx"

// secretParam is what a URL query parameter (or fragment parameter)
// carrying a credential is called: Redis' password= and
// sentinel_password=, an MCP server's ?token= or ?api_key=, OAuth's
// access_token=, a signed URL's sig=.
var secretParam = regexp.MustCompile(`(?i)(pass|pwd|secret|token|key|auth|sig|credential|session)`)

// MaskURL returns s with every credential it may carry replaced by
// "xxxxx": the password of the userinfo, and the value of every query or
// fragment parameter named like a credential (password=,
// sentinel_password=, token=, api_key= …). The scheme, user, host, path
// and the other parameters stay readable, since they are what an operator
// checks. A value that is only a ${NAME} reference stays, as it names a
// variable, not a secret. Text that is not a URL with a scheme is returned
// as is; a URL that cannot be parsed is Redacted whole.
func MaskURL(s string) string {
	if s == "" {
		return ""
	}
	// Only text that starts like a URL is one: "scheme://…", or
	// "scheme:…" carrying a query, fragment or userinfo (unix:/path?password=x).
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || strings.ContainsAny(s, " \t\r\n") || !validScheme(scheme) || !(strings.HasPrefix(rest, "//") || strings.ContainsAny(rest, "?#@")) {
		return s
	}
	parsed, err := url.Parse(s)
	if err != nil {
		return Redacted
	}
	if parsed.User != nil {
		if p, has := parsed.User.Password(); has && !envRef.MatchString(p) {
			parsed.User = url.UserPassword(parsed.User.Username(), maskedValue)
		}
	}
	parsed.RawQuery = maskParams(parsed.RawQuery)
	if parsed.Fragment != "" && strings.Contains(parsed.Fragment, "=") {
		parsed.RawFragment = maskParams(parsed.EscapedFragment())
		frag, err := url.PathUnescape(parsed.RawFragment)
		if err != nil {
			return Redacted
		}
		parsed.Fragment = frag
	}
	return parsed.String()
}

func validScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// maskParams masks the credential values of a raw query, keeping the
// order and the escaping of everything else. Both "&" and ";" separate
// parameters, since some parsers accept either.
func maskParams(raw string) string {
	if raw == "" {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		j := strings.IndexAny(raw[i:], "&;")
		end := len(raw)
		if j >= 0 {
			end = i + j
		}
		pair := raw[i:end]
		key, val, hasVal := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(key)
		if err != nil {
			name = key
		}
		b.WriteString(key)
		if hasVal {
			b.WriteByte('=')
			plain, err := url.QueryUnescape(val)
			switch {
			case val == "", err == nil && envRef.MatchString(plain):
				b.WriteString(val)
			case secretParam.MatchString(name):
				b.WriteString(maskedValue)
			default:
				b.WriteString(val)
			}
		}
		if end < len(raw) {
			b.WriteByte(raw[end])
		}
		i = end + 1
	}
	return b.String()
}

// String implements fmt.Stringer.
func (u SecretURL) String() string { return u.redacted() }

// GoString implements fmt.GoStringer (%#v).
func (u SecretURL) GoString() string { return fmt.Sprintf("%q", u.redacted()) }

// Format implements fmt.Formatter.
func (u SecretURL) Format(f fmt.State, verb rune) { formatShown(f, verb, u.redacted()) }

// formatShown prints shown, what a secret may show of itself, for any
// verb: quoted for %q and %#v, as is otherwise.
func formatShown(f fmt.State, verb rune, shown string) {
	if verb == 'q' || (verb == 'v' && f.Flag('#')) {
		fmt.Fprintf(f, "%q", shown)
		return
	}
	f.Write([]byte(shown))
}

// LogValue implements slog.LogValuer.
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(u.redacted()) }

// MarshalYAML implements yaml.Marshaler.
func (u SecretURL) MarshalYAML() (any, error) { return u.redacted(), nil }

// MarshalJSON implements json.Marshaler.
func (u SecretURL) MarshalJSON() ([]byte, error) { return json.Marshal(u.redacted()) }

// envRef matches a secret written as a reference to the environment,
// "${NAME}", in a section with no fixed variable for it (one of a list of
// apps).
var envRef = regexp.MustCompile("^" + envRefPattern + "$")

// EnvRef reads s written as "${NAME}" and returns NAME.
func (s Secret) EnvRef() (string, bool) {
	m := envRef.FindStringSubmatch(string(s))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// EnvRefs binds every field written as "${NAME}" to the environment
// variable NAME: a section whose credentials have no fixed variable (a
// list of apps, each with its own secret) returns them from Env. A
// reference whose variable is unset keeps its "${NAME}" text; the
// section's Validate reports it (see UnresolvedEnvRef).
func EnvRefs(fields ...*Secret) []EnvVar {
	var vars []EnvVar
	for _, f := range fields {
		if name, ok := f.EnvRef(); ok {
			vars = append(vars, Env(name, f))
		}
	}
	return vars
}

// UnresolvedEnvRef is the error of a secret still written "${NAME}" after
// the environment was applied, or nil. It names the variable, never a
// value.
func UnresolvedEnvRef(s Secret) error {
	if name, ok := s.EnvRef(); ok {
		return fmt.Errorf("the environment variable %s is not set", name)
	}
	return nil
}
