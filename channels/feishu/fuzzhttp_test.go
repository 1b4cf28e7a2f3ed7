package feishu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// FuzzCallbackHandler: any event body through the HTTP callback, as it
// comes (no encrypt key: the verification token in the body is the check)
// or encrypted and signed with the test key, is answered 2xx or 4xx
// without a panic; only a body carrying the verification token enqueues
// anything, and whatever is enqueued names a chat and a sender.
func FuzzCallbackHandler(f *testing.F) {
	msg := feishutest.Message{MessageID: "om_1", ChatID: "oc_1", ChatType: "p2p", Sender: "ou_u1", Token: testToken, Content: feishutest.Text("hi")}
	group := feishutest.Message{MessageID: "om_2", ChatID: "oc_2", ChatType: "group", Sender: "ou_u2", Token: testToken,
		Content: feishutest.Text("@_user_1 hello"), Mentions: []feishutest.Mention{mentionBot()}}
	post := msg
	post.MessageID, post.MsgType, post.Content = "om_3", "post", `{"zh_cn":{"title":"t","content":[[{"tag":"text","text":"x"}]]}}`
	forged := msg
	forged.MessageID, forged.Token = "om_4", "wrong"
	for _, b := range [][]byte{feishutest.Event(msg), feishutest.Event(group), feishutest.Event(post), feishutest.Event(forged),
		feishutest.Challenge(testToken, "c1"), []byte(`{"encrypt":"AAAA"}`), []byte(`{}`), []byte(`not json`)} {
		f.Add(b, false)
		f.Add(b, true)
	}
	plain := newFixture(f, func(c *Config, _ *Options) { c.EncryptKey = "" })
	encrypted := newFixture(f, nil)
	serve := func(event []byte, encrypt bool) (*fixture, *httptest.ResponseRecorder) {
		fx, body := plain, event
		if encrypt {
			fx, body = encrypted, feishutest.Encrypted(event, testKey)
		}
		// Signed as Feishu signs (headers only), served in process.
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header = feishutest.Request(EventsPath, body, fx.ch.cfg.EncryptKey.Reveal(), fx.now).Header
		rec := httptest.NewRecorder()
		fx.ch.ServeHTTP(rec, req)
		return fx, rec
	}
	// The seeds reach the parser: a message with the token is handed on,
	// plain and encrypted alike.
	for _, encrypt := range []bool{false, true} {
		probe := msg
		probe.MessageID = fmt.Sprintf("om_probe_%v", encrypt)
		if fx, rec := serve(feishutest.Event(probe), encrypt); rec.Code != http.StatusOK || len(fx.rec.messages()) != 1 {
			f.Fatalf("a message (encrypted %v): status %d, %d handed on", encrypt, rec.Code, len(fx.rec.messages()))
		}
	}
	f.Fuzz(func(t *testing.T, event []byte, encrypt bool) {
		fx := plain
		if encrypt {
			fx = encrypted
		}
		before := len(fx.rec.messages())
		_, rec := serve(event, encrypt)
		if rec.Code < 200 || rec.Code >= 500 {
			t.Fatalf("%q (encrypted %v): status %d", event, encrypt, rec.Code)
		}
		msgs := fx.rec.messages()[before:]
		for _, m := range msgs {
			if m.Chat == "" || m.User == "" {
				t.Fatalf("%q enqueued a message with no conversation: %+v", event, m)
			}
		}
		var env struct {
			Token  string `json:"token"`
			Header struct {
				Token string `json:"token"`
			} `json:"header"`
		}
		if len(msgs) > 0 && (json.Unmarshal(event, &env) != nil || (env.Token != testToken && env.Header.Token != testToken)) {
			t.Fatalf("%q carries no verification token, yet %d message(s) were enqueued", event, len(msgs))
		}
	})
}
