package slack

import (
	"encoding/json"
	"net/url"
	"regexp"
	"testing"

	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// FuzzInteractionsHandler: any signed body through POST
// /slack/interactions is answered 2xx or 4xx without a panic, and only a
// block_actions click on Approve or Deny carrying an approval id is
// handed on, as "/approve ID" or "/deny ID" from a user in a conversation,
// with no message id.
func FuzzInteractionsHandler(f *testing.F) {
	post := slacktest.Post{Channel: "C1", TS: "1800000000.000001", ThreadTS: "1700000000.000100", Text: "Approval needed"}
	for _, p := range []any{
		slacktest.Click(post, "U1", "ann", ActionApprove, "APPROVALID7", "http://127.0.0.1:1/r"),
		slacktest.Click(post, "U2", "bob", ActionDeny, "APPROVALID7", ""),
		slacktest.Click(slacktest.Post{Channel: "D1", TS: "1800000000.000002"}, "U1", "ann", ActionApprove, "X", ""),
		slacktest.Click(post, "U1", "ann", "other", "APPROVALID7", ""),
		slacktest.Click(post, "U1", "ann", ActionApprove, "not an id", ""),
		map[string]any{"type": "view_submission"},
		map[string]any{"type": "block_actions", "actions": "not a list"},
		map[string]any{"type": "block_actions", "actions": []any{nil}},
	} {
		f.Add(string(slacktest.InteractionForm(p)))
	}
	f.Add("payload=")
	f.Add("payload=%zz")
	f.Add("")
	fx := newFixture(f, nil)
	// The seeds reach the parser: a signed click is handed on.
	fx.fuzzPost(f, InteractionsPath, "application/x-www-form-urlencoded", slacktest.InteractionForm(slacktest.Click(post, "U9", "", ActionApprove, "PROBE", "")))
	if msgs := fx.h.messages(); len(msgs) != 1 || msgs[0].Text != "/approve PROBE" {
		f.Fatalf("a signed click was not handed on: %+v", msgs)
	}
	text := regexp.MustCompile(`^/(approve|deny) [A-Za-z0-9]{1,64}$`)
	f.Fuzz(func(t *testing.T, body string) {
		before := len(fx.h.messages())
		fx.fuzzPost(t, InteractionsPath, "application/x-www-form-urlencoded", []byte(body))
		n := fx.checkSubmitted(t, before, []byte(body))
		if n == 0 {
			return
		}
		var p struct {
			Type string `json:"type"`
		}
		form, err := url.ParseQuery(body)
		if n > 1 || err != nil || json.Unmarshal([]byte(form.Get("payload")), &p) != nil || p.Type != "block_actions" {
			t.Fatalf("%q is no click, yet %d message(s) were handed on", body, n)
		}
		m := fx.h.messages()[before]
		if !text.MatchString(m.Text) || m.ID != "" || m.Meta[metaClick] == "" {
			t.Fatalf("%q handed on %+v", body, m)
		}
	})
}
