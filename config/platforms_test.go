package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	_ "github.com/parleyhq/parley/agent/mcp" // tools.mcp
	_ "github.com/parleyhq/parley/agent/web" // tools.web_fetch, tools.web_search
	_ "github.com/parleyhq/parley/channels/install"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/policy"
)

// testchat is a platform registered by this test the way an adapter
// package registers itself: its own section type, its own environment
// variable, its own builtin policy level, and one RegisterPlatform call.
type testchat struct {
	Token config.Secret `yaml:"token"`
	Room  string        `yaml:"room"`
}

func (c *testchat) Enabled() bool { return c.Token.IsSet() }
func (c *testchat) Env() []config.EnvVar {
	return []config.EnvVar{config.Env("TESTCHAT_TOKEN", &c.Token)}
}
func (c *testchat) Validate() error {
	if c.Enabled() && c.Room == "" {
		return errors.New("room: required with TESTCHAT_TOKEN")
	}
	return nil
}

func init() {
	config.RegisterPlatform(config.Platform{
		Name:      "testchat",
		NewConfig: func() config.PlatformConfig { return &testchat{Room: "lobby"} },
		Policy:    &config.Level{Access: config.Access{DMs: new(false)}},
	})
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestANewPlatformNeedsOnlyItsRegistration: a platform registered in its
// own package is known to the file, the environment, validation, config
// check and the policy tree, with nothing else edited.
func TestANewPlatformNeedsOnlyItsRegistration(t *testing.T) {
	p := writeFile(t, "testchat:\n  room: ops\npolicies:\n  platforms:\n    testchat:\n      admins: [u1]\n")
	cfg, err := config.Load(p, env(map[string]string{"TESTCHAT_TOKEN": "tc-secret-1"}))
	if err != nil {
		t.Fatal(err)
	}
	sec, ok := config.Section[*testchat](cfg, "testchat")
	if !ok || sec.Room != "ops" || sec.Token.Reveal() != "tc-secret-1" {
		t.Fatalf("section = %+v, %v", sec, ok)
	}
	if !slices.Contains(config.EnvVars(), "TESTCHAT_TOKEN") || !slices.Contains(config.PlatformNames(), "testchat") {
		t.Error("the platform's environment variable or name is not listed")
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "testchat:\n    token: <secret>\n    room: ops") || strings.Contains(string(out), "tc-secret-1") {
		t.Errorf("config check output:\n%s", out)
	}
	// Its validation runs with everything else's.
	_, err = config.Load(writeFile(t, "testchat:\n  room: \"\"\n"), env(map[string]string{"TESTCHAT_TOKEN": "tc-secret-1"}))
	if err == nil || !strings.Contains(err.Error(), "testchat.room: required with TESTCHAT_TOKEN") {
		t.Errorf("Load = %v; want the section's own problem, keyed", err)
	}
	// Its builtin policy level applies above policies.default.
	d := policy.New(*policy.FromConfig(cfg)).Resolve(policy.Scope{Channel: "testchat"}).Access("u", "c", true)
	if d.Allowed || d.Level != "builtin testchat default" {
		t.Errorf("DM on testchat = %+v; want refused by the builtin level", d)
	}
}

func TestPlatformSectionsKeepTheirKeysAndVariables(t *testing.T) {
	file := `slack:
  follow_threads: false
  command: /ask
  post_every: 250ms
feishu:
  domain: lark
  reply_in_thread: false
wechat:
  chunk_chars: 300
`
	cfg, err := config.Load(writeFile(t, file), env(map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "sig", "SLACK_API_URL": "http://slack.test/api/",
		"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": "fs", "FEISHU_MODE": "webhook", "FEISHU_VERIFICATION_TOKEN": "vt",
		"WECHAT_ILINK_BASE_URL": "http://ilink.test", "WECOM_BOT_ID": "bot", "WECOM_BOT_SECRET": "wc",
	}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"slack:\n", "bot_token: <secret>", "api_url: http://slack.test/api/", "follow_threads: false", "command: /ask", "post_every: 250ms",
		"feishu:\n", "app_id: cli_1", "app_secret: <secret>", "domain: lark", "mode: webhook", "reply_in_thread: false",
		"wechat:\n", "ilink_base_url: http://ilink.test", "wecom_bot_id: bot", "wecom_bot_secret: <secret>", "chunk_chars: 300",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL",
		"FEISHU_APP_ID", "FEISHU_APP_SECRET", "FEISHU_VERIFICATION_TOKEN", "FEISHU_ENCRYPT_KEY", "FEISHU_BASE_URL", "FEISHU_MODE",
		"WECHAT_ILINK_BASE_URL", "WECOM_BOT_ID", "WECOM_BOT_SECRET", "WECOM_WS_URL"} {
		if !slices.Contains(config.EnvVars(), name) {
			t.Errorf("EnvVars lacks %s", name)
		}
	}
	// The printed file loads again into the same values (secrets aside).
	again, err := config.Load(writeFile(t, string(out)), env(nil))
	if err != nil {
		t.Fatalf("config check output does not load: %v\n%s", err, out)
	}
	if a, b := fmt.Sprint(again.Platforms["feishu"]), fmt.Sprint(cfg.Platforms["feishu"]); a != b {
		t.Errorf("feishu section %s, loaded again %s", b, a)
	}
}

func TestPlatformSectionErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown key in a section", "listen: ':1'\nslack:\n  bot_tokn: x\n", `line 3: unknown key "bot_tokn"`},
		{"wrong type in a section", "wechat:\n  chunk_chars: many\n", "line 2"},
		{"a section that is not a map", "feishu: [1, 2]\n", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v; want %q", err, tt.want)
			}
		})
	}
	// A section written as null keeps its defaults.
	cfg, err := config.Load(writeFile(t, "slack:\nwechat: ~\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := cfg.YAML(); !strings.Contains(string(out), "command: /parley") || !strings.Contains(string(out), "chunk_chars: 600") {
		t.Errorf("null sections lost their defaults:\n%s", out)
	}
}

// credentialName is what a field carrying a credential is called. A new
// field named like this that is not a Secret fails the test below.
var credentialName = regexp.MustCompile(`(?i)(token|secret|password|passwd|api_?key|encrypt_?key|credential)`)

var (
	secretType         = reflect.TypeFor[config.Secret]()
	secretURLType      = reflect.TypeFor[config.SecretURL]()
	secretTemplateType = reflect.TypeFor[config.SecretTemplate]()
)

// secretField is a Secret, SecretURL or SecretTemplate found in the config
// tree.
type secretField struct {
	path  string
	value string // what the test put there
}

// plantSecrets walks v (a struct, through pointers, maps and the sections
// of Config.Tools and Config.Platforms) and puts a distinct value into
// every Secret, SecretURL and literal SecretTemplate; it reports
// credential-named fields of any other type.
func plantSecrets(t *testing.T, v reflect.Value, path string, found *[]secretField) {
	t.Helper()
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		p := path + "." + f.Name
		switch {
		case f.Type == secretType || f.Type == secretTemplateType:
			val := fmt.Sprintf("planted-secret-%d", len(*found))
			fv.SetString(val)
			*found = append(*found, secretField{p, val})
		case f.Type == secretURLType:
			val := fmt.Sprintf("planted-password-%d", len(*found))
			fv.SetString("redis://user:" + val + "@redis:6379/0?master_name=m&sentinel_password=" + val + "&password=" + val)
			*found = append(*found, secretField{p, val})
		case f.Type.Kind() == reflect.String && (credentialName.MatchString(f.Name) || credentialName.MatchString(key)):
			t.Errorf("%s (%s) looks like a credential but is a %s, not a config.Secret: config check and the logs would print it", p, key, f.Type)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			// A list of accounts (wecom_app.apps): plant into one element
			// even when the defaults have none.
			if fv.Len() == 0 {
				fv.Set(reflect.MakeSlice(f.Type, 1, 1))
			}
			for i := range fv.Len() {
				plantSecrets(t, fv.Index(i).Addr(), fmt.Sprintf("%s[%d]", p, i), found)
			}
		case f.Type.Kind() == reflect.Map && f.Type.Key().Kind() == reflect.String:
			plantInMap(t, fv, p, found)
		default:
			plantSecrets(t, fv, p, found)
		}
	}
}

// secretsInMaps gives the maps that hold secrets an entry each, so that
// the walk below reaches them: an MCP server's headers and env.
const secretsInMaps = `tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp
        headers: {Authorization: x}
      files:
        command: npx
        env: {FILES_TOKEN: x}
`

// TestEverySecretIsMaskedEverywhere finds every secret of the whole
// configuration — the core keys, every tool section and every registered
// platform's section — by its type, sets it, and renders the configuration
// every way it can leave the process: config check, fmt, slog, JSON, and
// validation errors. There is no list of secret fields to keep up to date.
func TestEverySecretIsMaskedEverywhere(t *testing.T) {
	cfg, err := config.Load(writeFile(t, secretsInMaps), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	var found []secretField
	plantSecrets(t, reflect.ValueOf(&cfg), "Config", &found)
	var paths []string
	for _, f := range found {
		paths = append(paths, f.path)
	}
	for _, p := range config.Platforms() {
		if p.NewConfig != nil && cfg.Platforms[p.Name] == nil {
			t.Errorf("platform %s has no section in Default()", p.Name)
		}
	}
	for _, s := range config.ToolSections() {
		if cfg.Tools[s.Name] == nil {
			t.Errorf("tool section %s has no section in Default()", s.Name)
		}
	}
	for _, want := range []string{"Config.Sections[model].APIKey", "Config.Redis.URL", "Config.Platforms[slack].BotToken", "Config.Platforms[wechat].WeComSecret", "Config.Platforms[wecom_app].Apps[0].Secret",
		"Config.Tools[web_search].APIKey", "Config.Tools[mcp].Servers[gh].Headers[Authorization]", "Config.Tools[mcp].Servers[files].Env[FILES_TOKEN]"} {
		if !slices.Contains(paths, want) {
			t.Fatalf("the walk did not reach %s (found %v)", want, paths)
		}
	}
	t.Logf("secrets: %v", paths)

	renderings := map[string]string{}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	renderings["config check (YAML)"] = string(out)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		renderings["fmt "+verb] = fmt.Sprintf(verb, cfg)
		for name, sec := range cfg.Platforms {
			renderings["fmt "+verb+" "+name] = fmt.Sprintf(verb, sec)
		}
		for name, sec := range cfg.Tools {
			renderings["fmt "+verb+" tools."+name] = fmt.Sprintf(verb, sec)
		}
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "cfg", cfg, "model", agent.ModelSectionFrom(cfg), "slack", cfg.Platforms["slack"])
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "model", agent.ModelSectionFrom(cfg), "redis", cfg.Redis, "feishu", cfg.Platforms["feishu"], "mcp", cfg.Tools["mcp"])
	renderings["slog text"], renderings["slog json"] = text.String(), js.String()
	for name, sec := range cfg.Tools {
		b, err := json.Marshal(sec)
		if err != nil {
			t.Fatal(err)
		}
		renderings["json tools."+name] = string(b)
	}
	for name, sec := range cfg.Platforms {
		b, err := json.Marshal(sec)
		if err != nil {
			t.Fatal(err)
		}
		renderings["json "+name] = string(b)
	}
	// Invalid settings next to the secrets: the errors name keys, never values.
	if s, ok := cfg.Platforms["slack"].(interface{ Validate() error }); ok {
		if err := s.Validate(); err != nil {
			renderings["slack validation"] = err.Error()
		}
	}
	bad := writeFile(t, "gateway:\n  workers: 0\nfeishu:\n  mode: push\n")
	getenv := map[string]string{}
	for _, v := range config.EnvVars() {
		getenv[v] = "planted-env-" + strings.ToLower(v)
	}
	getenv["REDIS_URL"] = "redis://user:planted-env-password@redis:6379/0"
	getenv["PARLEY_SKILL_BODY_BUDGET"], getenv["PARLEY_LOG_FORMAT"], getenv["PARLEY_LOG_LEVEL"] = "1", "text", "info"
	getenv["PARLEY_CONFIG"], getenv["PARLEY_LISTEN"] = "", ":1"
	if _, err := config.Load(bad, env(getenv)); err == nil {
		t.Fatal("an invalid config loaded")
	} else {
		renderings["Load error"] = err.Error()
	}
	for how, text := range renderings {
		for _, f := range found {
			if strings.Contains(text, f.value) {
				t.Errorf("%s shows %s:\n%s", how, f.path, text)
			}
		}
		for name, v := range getenv {
			if credentialName.MatchString(name) && v != "" && strings.Contains(text, v) {
				t.Errorf("%s shows the value of %s:\n%s", how, name, text)
			}
		}
		if strings.Contains(text, "planted-env-password") {
			t.Errorf("%s shows the REDIS_URL password", how)
		}
	}
}

func TestRegisterPlatformRefusesMistakes(t *testing.T) {
	tests := []struct {
		name string
		p    config.Platform
	}{
		{"empty name", config.Platform{}},
		{"upper case", config.Platform{Name: "Slack2"}},
		{"a core key", config.Platform{Name: "model"}},
		{"twice", config.Platform{Name: "slack"}},
		{"not a pointer", config.Platform{Name: "valuechat", NewConfig: func() config.PlatformConfig { return valueSection{} }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterPlatform(%+v) did not panic", tt.p)
				}
			}()
			config.RegisterPlatform(tt.p)
		})
	}
}

type valueSection struct{}

func (valueSection) Enabled() bool        { return false }
func (valueSection) Env() []config.EnvVar { return nil }
func (valueSection) Validate() error      { return nil }

// plantInMap plants secrets in every value of m, a map with string keys:
// a secret value directly, a section or struct by walking it.
func plantInMap(t *testing.T, m reflect.Value, path string, found *[]secretField) {
	t.Helper()
	keys := slices.Sorted(func(yield func(string) bool) {
		for _, k := range m.MapKeys() {
			if !yield(k.String()) {
				return
			}
		}
	})
	elem := m.Type().Elem()
	for _, name := range keys {
		key, p := reflect.ValueOf(name).Convert(m.Type().Key()), path+"["+name+"]"
		switch {
		case elem == secretType || elem == secretTemplateType:
			val := fmt.Sprintf("planted-secret-%d", len(*found))
			m.SetMapIndex(key, reflect.ValueOf(val).Convert(elem))
			*found = append(*found, secretField{p, val})
		case elem.Kind() == reflect.Struct:
			// Map values cannot be set in place: walk a copy, put it back.
			v := reflect.New(elem)
			v.Elem().Set(m.MapIndex(key))
			plantSecrets(t, v, p, found)
			m.SetMapIndex(key, v.Elem())
		default:
			plantSecrets(t, m.MapIndex(key), p, found)
		}
	}
}

// TestConfigCheckMasksURLPasswords: a URL in any field of the file or the
// environment — REDIS_URL with ?password= or ?sentinel_password=, an MCP
// server or search URL with a token in its query, a base URL with userinfo —
// is shown by `parley config check` with its credentials masked.
func TestConfigCheckMasksURLPasswords(t *testing.T) {
	const file = `tools:
  mcp:
    servers:
      gh:
        url: https://mcp.example.com/mcp?token=planted-mcp-token&x=1
  web_search:
    provider: searxng
    url: https://searcher:planted-search-pw@searx.example.com/?api_key=planted-search-key
feishu:
  base_url: https://u:planted-feishu-pw@open.feishu.example/
`
	for _, redisURL := range []string{
		"redis://redis:6379/0?password=planted-redis-pw",
		"redis://s1:26379/0?master_name=m&sentinel_password=planted-redis-pw&addr=s2:26379",
		"redis://u:planted-redis-pw@s1:26379/0?master_name=m&sentinel_password=planted-redis-pw",
		"unix:///run/redis.sock?password=planted-redis-pw",
	} {
		cfg, err := config.Load(writeFile(t, file), env(map[string]string{"REDIS_URL": redisURL}))
		if err != nil {
			t.Fatal(err)
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatal(err)
		}
		for how, text := range map[string]string{"config check": string(out), "fmt": fmt.Sprintf("%v", cfg)} {
			if strings.Contains(text, "planted") {
				t.Errorf("REDIS_URL %s: %s shows a credential:\n%s", redisURL, how, text)
			}
			for _, want := range []string{"xxxxx", "https://mcp.example.com/mcp?token=xxxxx&x=1", "searx.example.com"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s does not show %q:\n%s", how, want, text)
				}
			}
		}
	}
}

// TestAdminScopeMatchesBlastRadius_Config (issue 12, item 3): a global
// admin names the platform of its id, and a platform's section names none
// of another platform's users.
func TestAdminScopeMatchesBlastRadius_Config(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // substring of the error; "" = valid
	}{
		{"qualified global admin", "policies:\n  default:\n    admins: ['testchat:u1']\n", ""},
		{"bare global admin", "policies:\n  default:\n    admins: [u1]\n", `policies.default.admins: "u1" must name its platform`},
		{"unknown platform prefix", "policies:\n  default:\n    admins: ['irc:u1']\n", `"irc:u1" must name its platform`},
		{"empty id", "policies:\n  default:\n    admins: ['testchat:']\n", `"testchat:" must name its platform`},
		{"another platform's user in a section", "policies:\n  platforms:\n    slack:\n      admins: ['feishu:ou_1']\n", `policies.platforms.slack.admins: "feishu:ou_1" names platform feishu`},
		{"bare id in a platform section", "policies:\n  platforms:\n    testchat:\n      admins: [u1]\n", ""},
		{"own platform named in its section", "policies:\n  platforms:\n    testchat:\n      workspaces:\n        w:\n          chats:\n            c:\n              admins: ['testchat:u1']\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.yaml), env(nil))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Load = %v; want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Load = %v; want an error with %q", err, tt.want)
			}
		})
	}
}

// TestApprovalKeysLoad: the approval keys of a policy level decode from
// the file, a duration included, and config check prints them back.
func TestApprovalKeysLoad(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "policies:\n  platforms:\n    slack:\n      tools:\n        approve: [deploy_*]\n        approve_writes: true\n      approvers:\n        users: [UOPS]\n        requester: false\n      approval_timeout: 90s\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	l := policy.FromConfig(cfg).Platforms["slack"].Level
	if l.Tools.Approve[0] != "deploy_*" || !*l.Tools.ApproveWrites || l.Approvers.Users[0] != "UOPS" || *l.Approvers.Requester || *l.ApprovalTimeout != 90*time.Second {
		t.Fatalf("decoded %+v", l)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"approve_writes: true", "approval_timeout: 1m30s", "requester: false"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config check does not show %q:\n%s", want, out)
		}
	}
}

// Every platform and tool source that retries reads the same three keys
// under retry:, validated the same way and named by their full key.
func TestRetrySectionsShareTheirKeys(t *testing.T) {
	file := `slack:
  retry: {max_attempts: 2, base: 250ms, max: 2s}
feishu:
  retry: {max_attempts: 5}
wechat:
  retry: {base: 2s}
wecom_app:
  retry: {max: 9s}
wechat_oa:
  retry: {max_attempts: 7}
tools:
  mcp:
    retry: {max: 3m}
`
	cfg, err := config.Load(writeFile(t, file), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max_attempts: 2", "base: 250ms", "max: 2s", "max_attempts: 5", "base: 2s", "max: 9s", "max_attempts: 7", "max: 3m0s"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	_, err = config.Load(writeFile(t, "wechat:\n  retry: {max_attempts: -1}\ntools:\n  mcp:\n    retry: {base: 2m, max: 1m}\n"), env(nil))
	for _, key := range []string{"wechat.retry.max_attempts", "tools.mcp.retry.max"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Load = %v; want an error naming %s", err, key)
		}
	}
}
