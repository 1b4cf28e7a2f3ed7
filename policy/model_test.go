package policy

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestModelResolvesPerLevel: model is a field like the others, and
// Explain shows the model a chat uses with the level that chose it.
func TestModelResolvesPerLevel(t *testing.T) {
	pol := Config{
		Platforms: map[string]PlatformPolicy{
			"feishu": {
				Level: config.Level{Model: "backup"},
				Workspaces: map[string]WorkspacePolicy{"t1": {
					Chats: map[string]config.Level{"oc_vip": {Model: config.DefaultModelKey}},
				}},
			},
		},
	}
	r := New(pol).WithModels(map[string]string{"backup": "qwen2.5-vl at http://vllm:8000/v1"})
	for _, tt := range []struct {
		scope       Scope
		model, from string
	}{
		{Scope{Channel: "slack", Workspace: "T1", Chat: "C1"}, config.DefaultModelKey, LevelBuiltin},
		{Scope{Channel: "feishu", Workspace: "t1", Chat: "oc_1"}, "backup", "policies.platforms.feishu"},
		{Scope{Channel: "feishu", Workspace: "t1", Chat: "oc_vip"}, config.DefaultModelKey, "policies.platforms.feishu.workspaces.t1.chats.oc_vip"},
	} {
		e := r.Resolve(tt.scope)
		if e.ModelKey() != tt.model || e.Model().Level != tt.from {
			t.Errorf("%+v: model %q from %q, want %q from %q", tt.scope, e.ModelKey(), e.Model().Level, tt.model, tt.from)
		}
	}
	var b strings.Builder
	if err := r.Explain(&b, Scope{Channel: "feishu", Workspace: "t1", Chat: "oc_1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "MODEL\n  backup (qwen2.5-vl at http://vllm:8000/v1)  policies.platforms.feishu\n") {
		t.Errorf("explain does not show the model:\n%s", b.String())
	}
}
