package feishu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

// FuzzCardActionHandler: any card.action.trigger-like body through the
// HTTP callback, encrypted and signed with the test key, is answered 2xx
// or 4xx without a panic, a 200 always with a JSON object; what reaches
// the gateway is only ever "/approve ID" or "/deny ID" from the one who
// clicked, in the chat the click came from, carrying the click's token.
func FuzzCardActionHandler(f *testing.F) {
	value := map[string]string{valueApproval: "apr1", valueDecision: decisionApprove, valueChat: "oc_1", valueThread: "om_1"}
	good := feishutest.CardAction{Token: testToken, Operator: "ou_u1", MessageID: "om_card", ChatID: "oc_1", Value: value}
	dm := good
	dm.Value = map[string]string{valueApproval: "apr2", valueDecision: decisionDeny, valueChat: "oc_1", valueDM: "1"}
	forwarded := good
	forwarded.ChatID = "oc_2"
	forged := good
	forged.Token = "wrong"
	for _, c := range []feishutest.CardAction{good, dm, forwarded, forged} {
		f.Add(feishutest.Click(c))
	}
	f.Add([]byte(`{"schema":"2.0","header":{"event_type":"card.action.trigger","token":"vtoken","event_id":"e"},"event":{"action":{"tag":"button","value":"a string"}}}`))
	f.Add([]byte(`{"schema":"2.0","header":{"event_type":"card.action.trigger","token":"vtoken"}}`))
	fx := newFixture(f, nil)
	serve := func(event []byte) *httptest.ResponseRecorder {
		body := feishutest.Encrypted(event, testKey)
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header = feishutest.Request(EventsPath, body, testKey, fx.now).Header
		rec := httptest.NewRecorder()
		fx.ch.ServeHTTP(rec, req)
		return rec
	}
	// The seeds reach the parser: a good click is handed on.
	if rec := serve(feishutest.Click(good)); rec.Code != http.StatusOK || len(fx.rec.messages()) != 1 {
		f.Fatalf("a click: status %d, %d handed on", rec.Code, len(fx.rec.messages()))
	}
	f.Fuzz(func(t *testing.T, event []byte) {
		before := len(fx.rec.messages())
		rec := serve(event)
		if rec.Code < 200 || rec.Code >= 500 {
			t.Fatalf("%q: status %d", event, rec.Code)
		}
		msgs := fx.rec.messages()[before:]
		if rec.Code == http.StatusOK && isCardAction(event) {
			var obj map[string]any
			if json.Unmarshal(rec.Body.Bytes(), &obj) != nil {
				t.Fatalf("%q: answered %q", event, rec.Body.String())
			}
		}
		var ev cardActionEvent
		var env struct {
			Header struct {
				Token string `json:"token"`
			} `json:"header"`
		}
		if len(msgs) > 0 && (json.Unmarshal(event, &env) != nil || env.Header.Token != testToken || json.Unmarshal(event, &ev) != nil) {
			t.Fatalf("%q carries no verification token, yet %d message(s) were handed on", event, len(msgs))
		}
		for _, m := range msgs {
			verb, id, _ := strings.Cut(m.Text, " ")
			if (verb != "/approve" && verb != "/deny") || !isApprovalID(id) ||
				m.User != ev.Event.Operator.OpenID || m.Chat != ev.Event.Context.OpenChatID || m.User == "" || m.Chat == "" {
				t.Fatalf("%q handed on %+v", event, m)
			}
		}
	})
}
