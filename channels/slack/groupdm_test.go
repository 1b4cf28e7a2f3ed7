package slack

import (
	"net/url"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// A group DM (mpim) is a direct message to the access rules, however it
// arrives: a mention (looked up once with conversations.info), a
// follow-up in its thread (channel_type mpim), a slash command run in it
// (channel_name mpdm-…). A channel stays a channel.
func TestAccessDMsGroupDMsAreDirectMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.slack.SetGroupDMs("G1")
	post := func(id string, ev map[string]any) {
		t.Helper()
		if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event(id, ev))); status != 200 {
			t.Fatalf("%s: status %d", id, status)
		}
	}
	post("Ev1", slacktest.Mention("G1", "U1", "1.1", "", "hi group"))
	post("Ev2", slacktest.Mention("G1", "U1", "1.2", "", "hi again"))
	post("Ev3", slacktest.Message("G1", "mpim", "U2", "1.3", "1.1", "a follow-up"))
	post("Ev4", slacktest.Mention("C1", "U1", "2.1", "", "hi channel"))
	post("Ev5", slacktest.Message("C1", "channel", "U2", "2.2", "2.1", "a channel follow-up"))
	cmd := func(channel, name, trigger string) []byte {
		return []byte(url.Values{"team_id": {slacktest.TeamID}, "channel_id": {channel}, "channel_name": {name},
			"user_id": {"U1"}, "command": {"/parley"}, "text": {"hi"}, "response_url": {f.slack.ResponseURL(trigger)}, "trigger_id": {trigger}}.Encode())
	}
	for _, c := range [][]byte{cmd("G1", "mpdm-ana--bob-1", "tr1"), cmd("C1", "general", "tr2"), cmd("D1", "directmessage", "tr3")} {
		if status, _ := f.post(t, CommandsPath, c); status != 200 {
			t.Fatalf("command: status %d", status)
		}
	}
	var got []string
	for _, m := range f.h.messages() {
		kind := "chat"
		if m.DM {
			kind = "dm"
		}
		if _, ok := m.Meta[metaMention]; ok {
			t.Errorf("the internal mention mark reached the gateway: %+v", m)
		}
		got = append(got, m.Chat+":"+kind)
	}
	want := "G1:dm G1:dm G1:dm C1:chat C1:chat G1:dm C1:chat D1:dm"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("messages %s; want %s", s, want)
	}
	if n := f.slack.Count("conversations.info"); n != 2 {
		t.Fatalf("%d conversations.info calls; want one per channel (G1, C1)", n)
	}
}

// A lookup that fails asks Slack to deliver the mention again rather than
// guessing; an app without the scope is answered as before, as a channel.
func TestGroupDMLookupFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.slack.Fail("conversations.info", slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500})
	if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("G1", "U1", "1.1", "", "hi")))); status < 500 {
		t.Fatalf("status %d; want a 5xx so that Slack retries", status)
	}
	if n := len(f.h.messages()); n != 0 {
		t.Fatalf("%d messages handed over without knowing their kind", n)
	}
	g := newFixture(t, nil)
	g.slack.Fail("conversations.info", slacktest.Failure{Error: "missing_scope"})
	if status, _ := g.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("G1", "U1", "1.1", "", "hi")))); status != 200 {
		t.Fatalf("missing scope: status %d", status)
	}
	if msgs := g.h.messages(); len(msgs) != 1 || msgs[0].DM {
		t.Fatalf("missing scope: %+v", msgs)
	}
}

// Where the access rules do not tell a direct message from a chat message,
// a mention is not looked up: the webhook makes no Web API call, even in a
// group DM or when conversations.info would fail. Where they do, it is.
func TestGroupDMLookupOnlyWhereTheRulesTellDMsApart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(_ *Config, o *Options) {
		o.DMMatters = func(m channels.Message) bool { return m.Chat == "G2" }
	})
	f.slack.SetGroupDMs("G1", "G2")
	f.slack.Fail("conversations.info", slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500}, slacktest.Failure{Status: 500})
	if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev1", slacktest.Mention("G1", "U1", "1.1", "", "hi")))); status != 200 {
		t.Fatalf("status %d", status)
	}
	if n := f.slack.Count("conversations.info"); n != 0 {
		t.Fatalf("%d conversations.info calls where the rules do not tell DMs apart", n)
	}
	msgs := f.h.messages()
	if len(msgs) != 1 || msgs[0].DM {
		t.Fatalf("messages %+v", msgs)
	}
	if _, ok := msgs[0].Meta[metaMention]; ok {
		t.Fatalf("the internal mention mark reached the gateway: %+v", msgs[0])
	}
	// G2's rules tell DMs apart: the failing lookup asks Slack to retry.
	if status, _ := f.post(t, EventsPath, mustJSON(t, slacktest.Event("Ev2", slacktest.Mention("G2", "U1", "2.1", "", "hi")))); status < 500 {
		t.Fatalf("status %d; want a 5xx so that Slack retries", status)
	}
	if n := f.slack.Count("conversations.info"); n == 0 {
		t.Fatal("no conversations.info call where the rules tell DMs apart")
	}
}
