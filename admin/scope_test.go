package admin

import (
	"testing"

	"github.com/parleyhq/parley/policy"
)

// TestScopeOfAConversationKey: the Policies page reads the account of a
// conversation of a second app from its key, never as the platform's
// name.
func TestScopeOfAConversationKey(t *testing.T) {
	for key, want := range map[string]policy.Scope{
		"slack:T1:C1:1.0":        {Channel: "slack", Workspace: "T1", Chat: "C1"},
		"slack/hr:T1:C1:1.0":     {Channel: "slack", Account: "hr", Workspace: "T1", Chat: "C1"},
		"feishu/ops:t1:oc_1:om_": {Channel: "feishu", Account: "ops", Workspace: "t1", Chat: "oc_1"},
		"console":                {Channel: "console"},
	} {
		if got := scopeOf(key); got != want {
			t.Errorf("scopeOf(%q) = %+v, want %+v", key, got, want)
		}
	}
}
