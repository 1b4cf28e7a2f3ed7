package gateway_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// feishuMention is the message the adapter submits for said, a mention
// in the topic thread of its chat.
func feishuMention(said feishutest.Said, text string) channels.Message {
	return channels.Message{ID: said.ID, Channel: feishu.Name, Workspace: "tenant1", Chat: said.ChatID, Thread: said.ThreadID,
		User: said.SenderID, Text: text, Received: time.Now(), Meta: map[string]string{
			feishu.MetaMessageID: said.ID, feishu.MetaChatType: "topic_group", feishu.MetaThreadID: said.ThreadID,
			feishu.MetaThreadKey: said.ChatID + ":" + said.ThreadID, feishu.MetaCreateTime: strconv.FormatInt(said.CreateMS, 10)}}
}

// TestFeishuTopicReachesTheModelAsData: on the fake Feishu, four people
// wrote in a topic (and the bot once), then the bot is mentioned: the
// model's user turn holds their messages with names inside the envelope,
// not the bot's answer; a second mention, answered by another replica,
// reads only what is new; a rate limit answers without the room and is
// counted.
func TestFeishuTopicReachesTheModelAsData(t *testing.T) {
	t.Parallel()
	r, model, fake := redistest.New(t), openaitest.New(t), feishutest.New(t)
	rp, other := newFeishuReplica(t, r, model, fake), newFeishuReplica(t, r, model, fake)
	for id, name := range map[string]string{"ou_ana": "Ana", "ou_bo": "Bo", "ou_cy": "Cy", "ou_di": "Di"} {
		fake.AddUser(id, name)
	}
	fake.Say("oc_g", "omt_1", "ou_ana", "shall we ship?")
	fake.Say("oc_g", "omt_1", "ou_bo", "the migration is not tested")
	fake.Say("oc_g", "omt_1", "ou_cy", "I can test thursday")
	fake.Say("oc_g", "omt_1", "ou_di", "who signs off?")
	mention := func(on *outboxReplica, text string) {
		t.Helper()
		said := fake.Say("oc_g", "omt_1", "ou_ana", "@_user_1 "+text,
			feishutest.SaidMention{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"})
		if err := on.gw.Submit(context.Background(), feishuMention(said, text)); err != nil {
			t.Fatal(err)
		}
	}
	answers := func(n int) {
		t.Helper()
		slacktest.WaitFor(t, "the answers", 30*time.Second, func() bool { return len(model.Requests()) >= n && len(fake.Sent()) >= n })
	}
	mention(rp, "summarise")
	answers(1)
	room := roomOf(t, lastUser(t, model.Requests(), 1))
	for _, want := range []string{"Ana (ou_ana): shall we ship?", "Bo (ou_bo): the migration is not tested",
		"Cy (ou_cy): I can test thursday", "Di (ou_di): who signs off?"} {
		if !strings.Contains(room, want) {
			t.Errorf("the room lacks %q:\n%s", want, room)
		}
	}
	if strings.Contains(room, "summarise") {
		t.Errorf("the mention is in its own room:\n%s", room)
	}

	fake.Say("oc_g", "omt_1", "ou_bo", "tested now")
	mention(other, "and now?")
	answers(2)
	room = roomOf(t, lastUser(t, model.Requests(), 2))
	if !strings.Contains(room, "Bo (ou_bo): tested now") || strings.Contains(room, "shall we ship") || strings.Contains(room, "echo: ") {
		t.Errorf("second room = %q, want only the new message (not the bot's answer)", room)
	}

	fake.Fail("list", feishutest.Failure{Status: 400, Code: 99991400})
	fake.Say("oc_g", "omt_1", "ou_cy", "one more")
	mention(rp, "last one")
	answers(3)
	if u := lastUser(t, model.Requests(), 3); !strings.HasSuffix(u, "last one") || strings.Contains(u, "one more") {
		t.Errorf("rate-limited turn = %q, want the question without the room", u)
	}
	if v := testutil.ToFloat64(rp.metrics.ContextReads.WithLabelValues(feishu.Name, metrics.OutcomeRateLimited)); v != 1 {
		t.Errorf("rate_limited reads = %v, want 1", v)
	}
}
