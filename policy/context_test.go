package policy

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestContextResolvesPerLevel: context.* are fields like the others: the
// builtin defaults read the thread and no recent messages, within 50
// messages and 12 KiB; the most specific level that sets a key decides it;
// and Explain shows each with its level.
func TestContextResolvesPerLevel(t *testing.T) {
	pol := Config{
		Default: config.Level{Context: config.Context{MaxBytes: new(4096)}},
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: config.Level{Context: config.Context{Recent: new(20)}},
				Workspaces: map[string]WorkspacePolicy{"T1": {
					Chats: map[string]config.Level{"C1": {Context: config.Context{Thread: new(false), MaxMessages: new(0)}}},
				}},
			},
		},
	}
	r := New(pol)
	const chat = "policies.platforms.slack.workspaces.T1.chats.C1"
	tests := []struct {
		scope Scope
		want  Context
	}{
		{Scope{Channel: "feishu", Workspace: "t", Chat: "c"}, Context{Thread: true, Recent: 0, MaxMessages: DefaultContextMaxMessages, MaxBytes: 4096}},
		{Scope{Channel: "slack", Workspace: "T2", Chat: "C9"}, Context{Thread: true, Recent: 20, MaxMessages: DefaultContextMaxMessages, MaxBytes: 4096}},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, Context{Thread: false, Recent: 20, MaxMessages: 0, MaxBytes: 4096}},
	}
	for _, tt := range tests {
		if got := r.Resolve(tt.scope).Context(); got != tt.want {
			t.Errorf("%+v: Context = %+v, want %+v", tt.scope, got, tt.want)
		}
	}
	if got := New(Config{}).Resolve(Scope{Channel: "slack"}).Context(); got != (Context{Thread: true, MaxMessages: 50, MaxBytes: 12288}) {
		t.Errorf("builtin Context = %+v", got)
	}

	out := explain(t, pol, Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, nil, nil)
	wantAll(t, out, "CONTEXT")
	for _, l := range []struct{ key, value, level string }{
		{"context.thread", "not read", chat},
		{"context.recent", "20 messages before a top-level mention", "policies.platforms.slack"},
		{"context.max_messages", "0", chat},
		{"context.max_bytes", "4096", "policies.default"},
	} {
		got := line(t, out, l.key)
		if !strings.Contains(got, l.value) || !strings.HasSuffix(strings.TrimSpace(got), l.level) {
			t.Errorf("explain line %q, want %s %s %s", got, l.key, l.value, l.level)
		}
	}
	out = explain(t, Config{}, Scope{Channel: "slack"}, nil, nil)
	if got := line(t, out, "context.thread"); !strings.Contains(got, "read") || strings.Contains(got, "not read") || !strings.HasSuffix(strings.TrimSpace(got), LevelBuiltin) {
		t.Errorf("builtin context.thread: explain line %q", got)
	}
}

// TestContextMustNotBeNegative: a negative context bound is a config error
// that names the key.
func TestContextMustNotBeNegative(t *testing.T) {
	cfg := config.Default()
	FromConfig(cfg).Platforms = map[string]PlatformPolicy{"slack": {Level: config.Level{
		Context: config.Context{Recent: new(-1), MaxMessages: new(-2), MaxBytes: new(-3)},
	}}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted negative context bounds")
	}
	wantAll(t, err.Error(), "policies.platforms.slack.context.recent: must not be negative",
		"policies.platforms.slack.context.max_messages: must not be negative",
		"policies.platforms.slack.context.max_bytes: must not be negative")
}
