package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/config"
)

// printings renders v every way a value leaves the process as text.
func printings(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s"} {
		out["fmt "+verb] = fmt.Sprintf(verb, v)
	}
	out["fmt.Sprint"] = fmt.Sprint(v)
	out["fmt.Sprintln"] = fmt.Sprintln(v)
	out["error %w"] = fmt.Errorf("wrapped: %w; value %v", errors.New("x"), v).Error()
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("m", "v", v, slog.Any("any", v), slog.Group("g", "v", v))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("m", "v", v, slog.Any("any", v))
	out["slog text"], out["slog json"] = text.String(), js.String()
	y, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out["yaml"] = string(y)
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out["json"] = string(j)
	return out
}

func TestSecretNeverPrintsItsValue(t *testing.T) {
	type section struct {
		Token config.Secret    `yaml:"token" json:"token"`
		URL   config.SecretURL `yaml:"url" json:"url"`
	}
	const token, password = "xoxb-very-secret-1", "hunter2"
	s := section{Token: token, URL: "redis://user:" + password + "@redis:6379/0"}
	for _, v := range []any{s.Token, s.URL, s, &s, []config.Secret{s.Token}, map[string]config.Secret{"k": s.Token}} {
		for how, text := range printings(t, v) {
			if strings.Contains(text, token) || strings.Contains(text, password) ||
				strings.Contains(text, fmt.Sprintf("%x", token)) || strings.Contains(text, fmt.Sprintf("%x", password)) {
				t.Errorf("%T through %s shows the secret: %s", v, how, text)
			}
		}
	}
	if got := printings(t, s)["yaml"]; !strings.Contains(got, "token: <secret>") || !strings.Contains(got, "url: redis://user:xxxxx@redis:6379/0") {
		t.Errorf("yaml = %q; want the token as <secret> and the URL with its password masked", got)
	}
	if s.Token.Reveal() != token || s.URL.Reveal() != "redis://user:hunter2@redis:6379/0" {
		t.Error("Reveal does not return the value")
	}
}

func TestEmptySecretPrintsEmpty(t *testing.T) {
	var s config.Secret
	if s.String() != "" || s.IsSet() || fmt.Sprintf("[%v]", s) != "[]" {
		t.Errorf("an unset secret prints %q; want it empty so that an operator sees it is unset", s.String())
	}
	if got, _ := yaml.Marshal(map[string]config.Secret{"k": ""}); strings.TrimSpace(string(got)) != `k: ""` {
		t.Errorf("yaml of an unset secret = %q", got)
	}
	if u := config.SecretURL("redis://redis:6379/0"); u.String() != "redis://redis:6379/0" {
		t.Errorf("a URL without a password is changed: %q", u.String())
	}
	if u := config.SecretURL("redis://%zz:pw@x"); strings.Contains(u.String(), "pw") {
		t.Errorf("an unparseable URL is shown: %q", u.String())
	}
}

func TestSecretDecodesFromYAML(t *testing.T) {
	var v struct {
		Token config.Secret    `yaml:"token"`
		URL   config.SecretURL `yaml:"url"`
	}
	if err := yaml.Unmarshal([]byte("token: abc\nurl: redis://:pw@h:1\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.Token.Reveal() != "abc" || v.URL.Reveal() != "redis://:pw@h:1" {
		t.Errorf("decoded %q %q", v.Token.Reveal(), v.URL.Reveal())
	}
}

// A secret written "${NAME}" is read from NAME; an unset NAME leaves the
// reference, which the section's validation names without a value.
func TestEnvRefs(t *testing.T) {
	a, b, c, d := config.Secret("${APP_ONE_SECRET}"), config.Secret("literal"), config.Secret("${APP_TWO_SECRET}"), config.Secret("${not valid}")
	vars := config.EnvRefs(&a, &b, &c, &d)
	if len(vars) != 2 || vars[0].Name != "APP_ONE_SECRET" || vars[1].Name != "APP_TWO_SECRET" {
		t.Fatalf("bindings %+v", vars)
	}
	env := map[string]string{"APP_ONE_SECRET": "s3cr3t-one"}
	for _, v := range vars {
		if val := env[v.Name]; val != "" {
			if err := v.Set(val); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.Reveal() != "s3cr3t-one" || b.Reveal() != "literal" {
		t.Fatalf("a=%q b=%q", a.Reveal(), b.Reveal())
	}
	if err := config.UnresolvedEnvRef(a); err != nil {
		t.Fatalf("resolved secret: %v", err)
	}
	err := config.UnresolvedEnvRef(c)
	if err == nil || !strings.Contains(err.Error(), "APP_TWO_SECRET") {
		t.Fatalf("unresolved: %v", err)
	}
	if config.UnresolvedEnvRef(d) != nil {
		t.Fatal("a malformed reference is a literal value, not a reference")
	}
}

// TestSecretsMaskedEverywhereURLForms: a password can sit in a URL's
// userinfo, in a query parameter (Redis' ?password= and
// ?sentinel_password=, a token= of an HTTP API) or in a fragment; every
// form is masked, and what an operator checks (host, user, options) stays.
func TestSecretsMaskedEverywhereURLForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://user:hunter2@redis:6379/0", "redis://user:xxxxx@redis:6379/0"},
		{"redis://:hunter2@redis:6379/0", "redis://:xxxxx@redis:6379/0"},
		{"redis://redis:6379/0?password=hunter2", "redis://redis:6379/0?password=xxxxx"},
		{"redis://redis:6379/0?db=1&password=hunter2&protocol=3", "redis://redis:6379/0?db=1&password=xxxxx&protocol=3"},
		{"redis://s1:26379/0?master_name=m&sentinel_password=hunter2&addr=s2:26379", "redis://s1:26379/0?master_name=m&sentinel_password=xxxxx&addr=s2:26379"},
		{"redis://s1:26379?master_name=m&sentinel_username=u&sentinel_password=hunter2&password=hunter2", "redis://s1:26379?master_name=m&sentinel_username=u&sentinel_password=xxxxx&password=xxxxx"},
		{"rediss://u:hunter2@r:6380?password=hunter2", "rediss://u:xxxxx@r:6380?password=xxxxx"},
		{"redis://r:6379?PASSWORD=hunter2", "redis://r:6379?PASSWORD=xxxxx"},
		{"redis://r:6379?pass%77ord=hunter2", "redis://r:6379?pass%77ord=xxxxx"},
		{"redis://r:6379?db=0;password=hunter2", "redis://r:6379?db=0;password=xxxxx"},
		{"unix:///run/redis.sock?password=hunter2&db=2", "unix:///run/redis.sock?password=xxxxx&db=2"},
		{"unix:/run/redis.sock?password=hunter2", "unix:/run/redis.sock?password=xxxxx"},
		{"https://mcp.example.com/mcp?token=hunter2", "https://mcp.example.com/mcp?token=xxxxx"},
		{"https://api.example.com/v1?api_key=hunter2&q=1", "https://api.example.com/v1?api_key=xxxxx&q=1"},
		{"https://app.example.com/cb#access_token=hunter2&state=s", "https://app.example.com/cb#access_token=xxxxx&state=s"},
		{"https://user:hunter2@search.example.com/", "https://user:xxxxx@search.example.com/"},
		{"redis://r:6379?password=${REDIS_PASSWORD}", "redis://r:6379?password=${REDIS_PASSWORD}"},
		{"redis://redis:6379/0", "redis://redis:6379/0"},
		{"https://slack.com/api/", "https://slack.com/api/"},
		{"not a url: password=hunter2?", "not a url: password=hunter2?"},
		{"", ""},
		{"redis://%zz:hunter2@x", config.Redacted},
	}
	for _, tt := range tests {
		if got := config.MaskURL(tt.in); got != tt.want {
			t.Errorf("MaskURL(%q) = %q; want %q", tt.in, got, tt.want)
		}
		if tt.want != tt.in && strings.Contains(config.SecretURL(tt.in).String(), "hunter2") {
			t.Errorf("SecretURL(%q) prints the password: %q", tt.in, config.SecretURL(tt.in).String())
		}
	}
}
