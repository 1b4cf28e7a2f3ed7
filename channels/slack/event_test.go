package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// Events as Slack delivers them, blocks and all: a mention in a channel
// and a follow-up in a thread the bot answered.
const (
	benchMention  = `{"token":"legacy","team_id":"T0123TEAM","context_team_id":"T0123TEAM","api_app_id":"A0123APP","type":"event_callback","event_id":"Ev0123ABCD","event_time":1700000000,"authorizations":[{"enterprise_id":null,"team_id":"T0123TEAM","user_id":"U0BOTUSER","is_bot":true,"is_enterprise_install":false}],"is_ext_shared_channel":false,"event_context":"4-eyJldCI6ImFwcF9tZW50aW9uIn0","event":{"user":"U0ASKER","type":"app_mention","ts":"1700000000.000100","client_msg_id":"5b6a7c1e-0000-4000-8000-000000000001","text":"<@U0BOTUSER> why did the deploy fail? the *error rate* doubled","team":"T0123TEAM","blocks":[{"type":"rich_text","block_id":"Xy1","elements":[{"type":"rich_text_section","elements":[{"type":"user","user_id":"U0BOTUSER"},{"type":"text","text":" why did the deploy fail? the "},{"type":"text","text":"error rate","style":{"bold":true}},{"type":"text","text":" doubled"}]}]}],"channel":"C0123ABCDEF","event_ts":"1700000000.000100"}}`
	benchFollowUp = `{"token":"legacy","team_id":"T0123TEAM","context_team_id":"T0123TEAM","api_app_id":"A0123APP","type":"event_callback","event_id":"Ev0123ABCE","event_time":1700000001,"authorizations":[{"enterprise_id":null,"team_id":"T0123TEAM","user_id":"U0BOTUSER","is_bot":true,"is_enterprise_install":false}],"is_ext_shared_channel":false,"event":{"user":"U0ASKER","type":"message","ts":"1700000001.000200","client_msg_id":"5b6a7c1e-0000-4000-8000-000000000002","text":"and how do I roll it back?","team":"T0123TEAM","thread_ts":"1700000000.000100","parent_user_id":"U0ASKER","blocks":[{"type":"rich_text","block_id":"Xy2","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"and how do I roll it back?"}]}]}],"channel":"C0123ABCDEF","event_ts":"1700000001.000200","channel_type":"channel"}}`
)

// BenchmarkEventDecode is the webhook's reading of an event: the envelope,
// then the message to submit.
func BenchmarkEventDecode(b *testing.B) {
	a, err := New(Config{BotToken: "xoxb-bench", FollowThreads: true}, Options{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, body string }{{"app_mention", benchMention}, {"message", benchFollowUp}} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				var env envelope
				if err := json.Unmarshal(body, &env); err != nil {
					b.Fatal(err)
				}
				if _, ok, why := a.message(env); !ok {
					b.Fatal(why)
				}
			}
		})
	}
}

// benchAnswer is a model's answer of the usual shape: paragraphs, a list,
// some emphasis and code.
const benchAnswer = "The deploy failed because the migration timed out on the `orders` table.\n\n" +
	"To roll it back:\n\n" +
	"1. Revert the release with `deploy rollback --to v41`.\n" +
	"2. Watch the **error rate** on the dashboard for ten minutes.\n" +
	"3. Tell the channel once it is back to normal.\n\n" +
	"The migration itself should run in batches; see https://example.com/runbooks/migrations for how.\n" +
	"Most of the time this takes a few minutes, and nothing else needs to change."

// BenchmarkToMrkdwn converts a model's answer for Slack, as every post of
// it does.
func BenchmarkToMrkdwn(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ToMrkdwn(benchAnswer, false)
	}
}

// TestEventAsSlackSendsIt: a real-shaped event (blocks, a team, a client
// message id: fields Parley does not read) gives the message it means, and
// files that cannot be read leave it without attachments, not unanswered.
func TestEventAsSlackSendsIt(t *testing.T) {
	t.Parallel()
	a, err := New(Config{BotToken: "xoxb-test", FollowThreads: true}, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(t *testing.T, body string) channels.Message {
		t.Helper()
		var env envelope
		if err := json.Unmarshal([]byte(body), &env); err != nil {
			t.Fatal(err)
		}
		m, ok, why := a.message(env)
		if !ok {
			t.Fatalf("not taken: %s", why)
		}
		return m
	}
	m := decode(t, benchMention)
	if m.Chat != "C0123ABCDEF" || m.User != "U0ASKER" || m.Thread != "1700000000.000100" || m.Workspace != "T0123TEAM" ||
		m.Text != "why did the deploy fail? the *error rate* doubled" || m.Meta[MetaTS] != "1700000000.000100" || m.ID != "Ev0123ABCD" {
		t.Errorf("mention = %+v", m)
	}
	m = decode(t, benchFollowUp)
	if m.Chat != "C0123ABCDEF" || m.Thread != "1700000000.000100" || m.RequireMark != MarkFollowed || m.DM || m.Text != "and how do I roll it back?" {
		t.Errorf("follow-up = %+v", m)
	}
	bad := strings.Replace(benchMention, `"team":"T0123TEAM","blocks"`, `"files":"not a list","blocks"`, 1)
	if bad == benchMention {
		t.Fatal("the files field was not added")
	}
	if m := decode(t, bad); len(m.Attachments) != 0 || m.Text == "" {
		t.Errorf("mention with unreadable files = %+v", m)
	}
}
