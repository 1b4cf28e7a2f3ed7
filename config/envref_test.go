package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"A": "alpha", "B": "beta"}
	getenv := func(k string) string { return env[k] }
	var seen []string
	got, err := config.ExpandEnv("x ${A} ${B}$ $A ${A}", getenv, func(s string) { seen = append(seen, s) })
	if err != nil || got != "x alpha beta$ $A alpha" {
		t.Errorf("ExpandEnv = %q, %v", got, err)
	}
	if !slices.Equal(seen, []string{"alpha", "beta", "alpha"}) {
		t.Errorf("seen = %v", seen)
	}
	_, err = config.ExpandEnv("${A}${C}${D}${C}", getenv, nil)
	if err == nil || err.Error() != "environment variable C, D is not set" {
		t.Errorf("ExpandEnv with unset variables = %v", err)
	}
	if got := config.EnvRefNames("${B} ${A} ${B} $C ${D"); !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("EnvRefNames = %v", got)
	}
	for s, ok := range map[string]bool{"${A}": true, "plain": true, "a ${A} b": true, "${A": false, "${1A}": false, "x ${": false} {
		if err := config.CheckEnvRefs(s); (err == nil) != ok {
			t.Errorf("CheckEnvRefs(%q) = %v", s, err)
		}
	}
}

// A SecretTemplate that only names variables prints as written, so that an
// operator sees where a header comes from; one that holds a credential of
// its own prints as <secret>, every way a Secret does.
func TestSecretTemplatePrintsReferencesOnly(t *testing.T) {
	tests := []struct {
		value string
		shown bool
	}{
		{"${GITHUB_TOKEN}", true},
		{"Bearer ${GITHUB_TOKEN}", true},
		{"token ${A}", true},
		{"${USER}:${PASSWORD}", true},
		{"Bearer ghp_literal_token", false},
		{"ghp_literal_token", false},
		{"ghp_${SUFFIX}", false},
		{"${PREFIX}ghp_literal", false},
		{"Bearer abc ${A}", false},
		{"Bearer ${A} extra", false},
		{"${A}密码", false},
		{"Bearer ${TOKEN", false}, // not a reference: it would be sent as written
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			s := config.SecretTemplate(tt.value)
			for how, text := range printings(t, s) {
				if tt.shown && !strings.Contains(text, tt.value) && how != "fmt %x" && how != "fmt %X" && how != "fmt %d" {
					t.Errorf("%s = %q; want the reference as written", how, text)
				}
				if !tt.shown && (strings.Contains(text, tt.value) || strings.Contains(text, fmt.Sprintf("%x", tt.value))) {
					t.Errorf("%s shows the value: %q", how, text)
				}
			}
			if s.Reveal() != tt.value {
				t.Errorf("Reveal = %q", s.Reveal())
			}
		})
	}
	if config.SecretTemplate("").String() != "" {
		t.Error("an empty template does not print empty")
	}
}
