package wechat

import (
	"encoding/json"
	"testing"
)

// FuzzILinkMessage: any message of a getupdates batch decodes or is
// skipped, and its text is read without a panic.
func FuzzILinkMessage(f *testing.F) {
	f.Add([]byte(`{"message_id":1,"from_user_id":"u@im.wechat","group_id":"","message_type":1,"item_list":[{"type":1,"text_item":{"text":"hi"}}],"context_token":"t"}`))
	f.Add([]byte(`{"message_type":1,"item_list":[{"type":3,"voice_item":{"text":"voice"}},{"type":2}]}`))
	f.Add([]byte(`{"item_list":[{"type":1}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m ilinkMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return
		}
		_ = m.id()
		_ = messageText(m.ItemList)
	})
}
