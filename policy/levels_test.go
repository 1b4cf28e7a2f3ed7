package policy

import (
	"slices"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestLevelsWalkTheTree: every level once, with its key and platform, the
// default first and each platform's, workspace's and chat's by name.
func TestLevelsWalkTheTree(t *testing.T) {
	p := &Config{
		Default: config.Level{Model: "d"},
		Platforms: map[string]PlatformPolicy{
			"slack": {Level: config.Level{Model: "s"}, Workspaces: map[string]WorkspacePolicy{
				"T2": {}, "T1": {Chats: map[string]config.Level{"C2": {}, "C1": {Model: "c"}}},
			}},
			"feishu": {},
		},
	}
	var keys, platforms, models []string
	for _, l := range p.Levels() {
		keys = append(keys, l.Key)
		platforms = append(platforms, l.Platform)
		models = append(models, l.Level.Model)
	}
	wantKeys := []string{"policies.default", "policies.platforms.feishu", "policies.platforms.slack",
		"policies.platforms.slack.workspaces.T1", "policies.platforms.slack.workspaces.T1.chats.C1",
		"policies.platforms.slack.workspaces.T1.chats.C2", "policies.platforms.slack.workspaces.T2"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys = %v, want %v", keys, wantKeys)
	}
	if want := []string{"", "feishu", "slack", "slack", "slack", "slack", "slack"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms = %v, want %v", platforms, want)
	}
	if want := []string{"d", "", "s", "", "c", "", ""}; !slices.Equal(models, want) {
		t.Errorf("models = %v, want %v", models, want)
	}
}
