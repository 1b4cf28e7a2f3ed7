package policy

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestLimitsResolvePerLevel: limits.* and budget.* are fields like the
// others: the most specific level that sets one decides it, zero lifts a
// limit set above, and Explain names the deciding level.
func TestLimitsResolvePerLevel(t *testing.T) {
	pol := Config{
		Default: config.Level{
			Limits: config.Limits{UserPerMinute: new(20), WorkspacePerMinute: new(600)},
			Budget: config.Budget{TokensPerUserDay: new(int64(200000))},
		},
		Platforms: map[string]PlatformPolicy{
			"slack": {
				Level: config.Level{Limits: config.Limits{UserPerMinute: new(5), ReplyPosts: new(3)}},
				Workspaces: map[string]WorkspacePolicy{"T1": {
					Level: config.Level{Budget: config.Budget{TokensPerUserDay: new(int64(0))}},
					Chats: map[string]config.Level{"C1": {Limits: config.Limits{UserPerMinute: new(0), WorkspacePerMinute: new(30), ReplyChars: new(0)}}},
				}},
			},
		},
	}
	r := New(pol)
	const chat = "policies.platforms.slack.workspaces.T1.chats.C1"
	tests := []struct {
		scope Scope
		want  Limits
		rules map[string]Decision
	}{
		{Scope{Channel: "feishu", Workspace: "t", Chat: "c"}, Limits{20, 600, 200000, DefaultReplyChars, DefaultReplyPosts}, map[string]Decision{
			"user": {Rule: "limits.user_per_minute: 20", Level: "policies.default"},
		}},
		{Scope{Channel: "slack", Workspace: "T2", Chat: "C9"}, Limits{5, 600, 200000, DefaultReplyChars, 3}, map[string]Decision{
			"user":      {Rule: "limits.user_per_minute: 5", Level: "policies.platforms.slack"},
			"workspace": {Rule: "limits.workspace_per_minute: 600", Level: "policies.default"},
		}},
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, Limits{0, 30, 0, 0, 3}, map[string]Decision{
			"workspace": {Rule: "limits.workspace_per_minute: 30", Level: chat},
			"budget":    {Rule: "budget.tokens_per_user_day: 0", Level: "policies.platforms.slack.workspaces.T1"},
		}},
	}
	for _, tt := range tests {
		e := r.Resolve(tt.scope)
		if got := e.Limits(); got != tt.want {
			t.Errorf("%+v: Limits = %+v, want %+v", tt.scope, got, tt.want)
		}
		for which, want := range tt.rules {
			if got := e.LimitRule(which); got != want {
				t.Errorf("%+v: LimitRule(%s) = %+v, want %+v", tt.scope, which, got, want)
			}
		}
	}

	out := explain(t, pol, Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, nil, nil)
	wantAll(t, out, "LIMITS")
	for _, l := range []struct{ key, value, level string }{
		{"limits.user_per_minute", "none", chat},
		{"limits.workspace_per_minute", "30", chat},
		{"budget.tokens_per_user_day", "none", "policies.platforms.slack.workspaces.T1"},
		{"limits.reply_chars", "none", chat},
		{"limits.reply_posts", "3", "policies.platforms.slack"},
	} {
		got := strings.Fields(line(t, out, l.key))
		if len(got) != 3 || got[1] != l.value || got[2] != l.level {
			t.Errorf("explain line %v, want %s %s %s", got, l.key, l.value, l.level)
		}
	}
	out = explain(t, Config{}, Scope{Channel: "slack"}, nil, nil)
	if got := strings.Fields(line(t, out, "limits.user_per_minute")); got[1] != "none" || got[2]+" "+got[3] != LevelBuiltin {
		t.Errorf("no limit set: explain line %v", got)
	}
	if got := strings.Fields(line(t, out, "limits.reply_chars")); got[1] != "40000" || got[2]+" "+got[3] != LevelBuiltin {
		t.Errorf("builtin reply cap: explain line %v", got)
	}
}

// TestLimitsMustNotBeNegative: a negative limit is a config error that
// names the key.
func TestLimitsMustNotBeNegative(t *testing.T) {
	cfg := config.Default()
	FromConfig(cfg).Platforms = map[string]PlatformPolicy{"slack": {Level: config.Level{
		Limits: config.Limits{WorkspacePerMinute: new(-1), ReplyPosts: new(-2)},
		Budget: config.Budget{TokensPerUserDay: new(int64(-5))},
	}}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted negative limits")
	}
	wantAll(t, err.Error(), "policies.platforms.slack.limits.workspace_per_minute: must not be negative",
		"policies.platforms.slack.budget.tokens_per_user_day: must not be negative",
		"policies.platforms.slack.limits.reply_posts: must not be negative")
}
