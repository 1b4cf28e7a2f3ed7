package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// envRefPattern is one ${NAME} reference to an environment variable, the
// one syntax of the configuration for values that live in the
// environment: a whole Secret (see Secret.EnvRef) or parts of a value
// expanded when it is used (SecretTemplate, ExpandEnv).
const envRefPattern = `\$\{([A-Za-z_][A-Za-z0-9_]*)\}`

// envRefRE matches a reference anywhere in a value.
var envRefRE = regexp.MustCompile(envRefPattern)

// EnvRefNames returns the names of the environment variables s refers to
// as ${NAME}, sorted and without repeats.
func EnvRefNames(s string) []string {
	seen := map[string]bool{}
	for _, m := range envRefRE.FindAllStringSubmatch(s, -1) {
		seen[m[1]] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// CheckEnvRefs reports a "${" in s that does not open a valid ${NAME}
// reference, so that a typo is a configuration error rather than a
// literal "${" sent to a server.
func CheckEnvRefs(s string) error {
	if strings.Contains(envRefRE.ReplaceAllString(s, ""), "${") {
		return errors.New(`"${" must open an environment variable reference like ${NAME}`)
	}
	return nil
}

// ReplaceEnvRefs replaces every ${NAME} in s with repl(NAME), for checks
// that need a value of the right shape without the environment.
func ReplaceEnvRefs(s string, repl func(name string) string) string {
	return envRefRE.ReplaceAllStringFunc(s, func(ref string) string { return repl(ref[2 : len(ref)-1]) })
}

// ExpandEnv replaces every ${NAME} in s with getenv(NAME). It fails, naming
// the variables but never a value, when one is unset or empty, so that a
// missing token is a clear error rather than an empty header. Every
// substituted value is handed to seen (nil: none), so that the caller can
// scrub it from what it logs.
func ExpandEnv(s string, getenv func(string) string, seen func(value string)) (string, error) {
	var missing []string
	out := ReplaceEnvRefs(s, func(name string) string {
		v := getenv(name)
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		if seen != nil {
			seen(v)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// SecretTemplate is a credential that is either written literally or names
// environment variables as ${NAME}, such as an HTTP header value
// "Bearer ${GITHUB_TOKEN}". The package that uses it expands the
// references when it needs the value (Expand), so the credential itself
// need not be in the file.
//
// It prints like a Secret, with one exception that lets an operator check
// which variable a value comes from: a value whose only literal text,
// besides its references, is an authorization scheme word ("Bearer ",
// "token ") and separators such as ":" prints as written, since it holds no
// credential. Anything else prints as Redacted.
type SecretTemplate string

// Reveal returns the value as written, references unexpanded.
func (s SecretTemplate) Reveal() string { return string(s) }

// IsSet reports whether the value is not empty.
func (s SecretTemplate) IsSet() bool { return s != "" }

// EnvRefs returns the environment variables the value names.
func (s SecretTemplate) EnvRefs() []string { return EnvRefNames(string(s)) }

// Expand returns the value with its references replaced (see ExpandEnv).
func (s SecretTemplate) Expand(getenv func(string) string, seen func(value string)) (string, error) {
	return ExpandEnv(string(s), getenv, seen)
}

// literalRE is what a printable template may hold besides its references:
// an optional scheme word followed by blanks, then separators ("${USER}:${PASS}").
var literalRE = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9-]*[ \t]+)?[ \t:;,./@=+_-]*$`)

func (s SecretTemplate) redacted() string {
	if s == "" {
		return ""
	}
	v := string(s)
	if envRefRE.MatchString(v) && CheckEnvRefs(v) == nil && literalRE.MatchString(envRefRE.ReplaceAllString(v, "")) {
		return v
	}
	return Redacted
}

// String implements fmt.Stringer.
func (s SecretTemplate) String() string { return s.redacted() }

// GoString implements fmt.GoStringer (%#v).
func (s SecretTemplate) GoString() string { return fmt.Sprintf("%q", s.redacted()) }

// Format implements fmt.Formatter.
func (s SecretTemplate) Format(f fmt.State, verb rune) { formatShown(f, verb, s.redacted()) }

// LogValue implements slog.LogValuer.
func (s SecretTemplate) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// MarshalYAML implements yaml.Marshaler: `parley config check` shows a
// reference as written and a literal credential as Redacted.
func (s SecretTemplate) MarshalYAML() (any, error) { return s.redacted(), nil }

// MarshalJSON implements json.Marshaler.
func (s SecretTemplate) MarshalJSON() ([]byte, error) { return json.Marshal(s.redacted()) }
