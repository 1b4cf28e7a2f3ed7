package sessions

import "testing"

// TestConversationIDShownWithoutTrailingSeparator: a key's empty trailing
// parts are not shown, and either form names the key again.
func TestConversationIDShownWithoutTrailingSeparator(t *testing.T) {
	for _, tt := range []struct{ key, shown string }{
		{"console::f0804e6bda20:", "console::f0804e6bda20"},
		{"slack:T1:C1:", "slack:T1:C1"},
		{"slack:T1:C1:1700000000.000100", "slack:T1:C1:1700000000.000100"},
		{"wecom::a:b:", "wecom::a:b:"}, // a part with a separator of its own: shown whole
		{"cron:::", "cron"},
	} {
		if got := ShownKey(tt.key); got != tt.shown {
			t.Errorf("ShownKey(%q) = %q, want %q", tt.key, got, tt.shown)
		}
		if got := KeyOf(tt.shown); got != tt.key {
			t.Errorf("KeyOf(%q) = %q, want %q", tt.shown, got, tt.key)
		}
		if got := KeyOf(tt.key); got != tt.key {
			t.Errorf("KeyOf(%q) = %q, want the key itself", tt.key, got)
		}
	}
}
