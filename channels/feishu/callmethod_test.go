package feishu

import "testing"

func TestCallMethodNamesThePathWithoutItsIDs(t *testing.T) {
	for path, want := range map[string]string{
		"/open-apis/auth/v3/tenant_access_token/internal":                         "auth/v3/tenant_access_token/internal",
		"/open-apis/im/v1/messages":                                               "im/v1/messages",
		"/open-apis/im/v1/messages/om_dc13264520392913993dd051dba21dcf/reply":     "im/v1/messages/:id/reply",
		"/open-apis/im/v1/messages/om_reply/reactions":                            "im/v1/messages/:id/reactions",
		"/open-apis/cardkit/v1/cards/7355372766134157313/elements/answer/content": "cardkit/v1/cards/:id/elements/answer/content",
		"/open-apis/im/v1/chats/oc_a0553eda9014c201e6969b478895c230/members":      "im/v1/chats/:id/members",
		"/base/open-apis/bot/v3/info":                                             "bot/v3/info",
		"/callback/ws/endpoint":                                                   "other",
		"/open-apis/a/b/c/d/e/f/g/h/i":                                            "other",
		"/open-apis/im/v1/messages/MIXEDcase":                                     "im/v1/messages/:id",
	} {
		if got := callMethod(path); got != want {
			t.Errorf("callMethod(%q) = %q, want %q", path, got, want)
		}
	}
}
