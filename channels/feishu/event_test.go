package feishu

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

func (f *fixture) mustPost(t *testing.T, m feishutest.Message) {
	t.Helper()
	m.Token = testToken
	if status, body := f.post(t, feishutest.Event(m)); status != 200 {
		t.Fatalf("callback for %s: %d %s", m.MessageID, status, body)
	}
}

func TestGroupWithTwoUsersOnlyMentionsStartTurns(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := newFixture(t, func(c *Config, o *Options) { o.Redis, o.Prefix = r.Client, r.Prefix })
	bob := feishutest.Mention{Key: "@_user_2", OpenID: "ou_bob", Name: "Bob"}
	// Alice asks the bot, naming Bob.
	f.mustPost(t, feishutest.Message{MessageID: "om_a1", ChatID: "oc_g", ChatType: "group", Sender: "ou_alice",
		Content: feishutest.Text("@_user_1 please greet @_user_2"), Mentions: []feishutest.Mention{mentionBot(), bob}})
	// Bob talks to Alice at the top level without mentioning the bot.
	f.mustPost(t, feishutest.Message{MessageID: "om_b1", ChatID: "oc_g", ChatType: "group", Sender: "ou_bob",
		Content: feishutest.Text("hi alice")})
	// Bob mentions only Alice.
	f.mustPost(t, feishutest.Message{MessageID: "om_b2", ChatID: "oc_g", ChatType: "group", Sender: "ou_bob",
		Content: feishutest.Text("@_user_1 lunch?"), Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: "ou_alice", Name: "Alice"}}})
	// Bob continues in the thread the bot is answering: no mention needed.
	f.mustPost(t, feishutest.Message{MessageID: "om_b3", ChatID: "oc_g", ChatType: "group", Sender: "ou_bob",
		RootID: "om_a1", ParentID: "om_a1", ThreadID: "omt_1", Content: feishutest.Text("and me too")})
	// A reply in some other thread the bot never answered is ignored.
	f.mustPost(t, feishutest.Message{MessageID: "om_b4", ChatID: "oc_g", ChatType: "group", Sender: "ou_bob",
		RootID: "om_b1", ThreadID: "omt_2", Content: feishutest.Text("ok")})

	msgs := f.rec.messages()
	if len(msgs) != 2 {
		t.Fatalf("submitted %d messages: %+v; want om_a1 and om_b3", len(msgs), msgs)
	}
	a, b := msgs[0], msgs[1]
	if a.ID != "om_a1" || a.Text != "please greet @Bob" || a.User != "ou_alice" || a.DM {
		t.Errorf("first message %+v", a)
	}
	if a.Channel != "feishu" || a.Workspace != "tenant1" || a.Chat != "oc_g" || a.Thread != "om_a1" {
		t.Errorf("first message routing %+v", a)
	}
	if a.Meta[MetaMessageID] != "om_a1" || a.Meta[MetaInThread] != "1" {
		t.Errorf("first message meta %v", a.Meta)
	}
	if b.ID != "om_b3" || b.Text != "and me too" || b.ConversationKey() != a.ConversationKey() {
		t.Errorf("follow-up %+v is not in %s", b, a.ConversationKey())
	}
	// The thread is remembered in Redis under the configured prefix.
	keys, err := r.Client.Keys(context.Background(), r.Prefix+"feishu:thread:*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("thread keys %v, %v", keys, err)
	}
	if ttl := r.Client.TTL(context.Background(), keys[0]).Val(); ttl <= 0 {
		t.Errorf("thread key has no TTL (%v)", ttl)
	}

	// The reply goes into the thread of the mention.
	if err := f.ch.Send(context.Background(), a, channels.Reply{Text: "Hello **Bob**"}); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].Kind != "reply" || sent[0].ReplyTo != "om_a1" || !sent[0].ReplyInThread || sent[0].MsgType != "interactive" || sent[0].Text != "Hello **Bob**" || sent[0].UUID == "" {
		t.Fatalf("sent %+v", sent)
	}
}

func TestFollowThreadsOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { c.FollowThreads = false })
	f.mustPost(t, feishutest.Message{MessageID: "om_1", ChatID: "oc_g", ChatType: "group", Sender: "ou_a",
		Content: feishutest.Text("@_user_1 hi"), Mentions: []feishutest.Mention{mentionBot()}})
	f.mustPost(t, feishutest.Message{MessageID: "om_2", ChatID: "oc_g", ChatType: "group", Sender: "ou_a",
		RootID: "om_1", ThreadID: "omt_1", Content: feishutest.Text("more")})
	if msgs := f.rec.messages(); len(msgs) != 1 {
		t.Fatalf("submitted %d; want only the mention", len(msgs))
	}
}

func TestTopicGroupThreadIsOneConversation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	base := feishutest.Message{ChatID: "oc_topics", ChatType: "topic_group", ThreadID: "omt_topic"}
	m1 := base
	m1.MessageID, m1.Sender, m1.Content, m1.Mentions = "om_t1", "ou_a", feishutest.Text("@_user_1 what is 2+2?"), []feishutest.Mention{mentionBot()}
	m2 := base
	m2.MessageID, m2.Sender, m2.RootID, m2.Content = "om_t2", "ou_b", "om_t1", feishutest.Text("and 3+3?")
	m3 := base
	m3.MessageID, m3.Sender, m3.RootID, m3.Content, m3.Mentions = "om_t3", "ou_a", "om_t1", feishutest.Text("@_user_1 thanks"), []feishutest.Mention{mentionBot()}
	other := base
	other.ThreadID, other.MessageID, other.Sender, other.Content, other.Mentions = "omt_other", "om_o1", "ou_a", feishutest.Text("@_user_1 new topic"), []feishutest.Mention{mentionBot()}
	for _, m := range []feishutest.Message{m1, m2, m3, other} {
		f.mustPost(t, m)
	}
	msgs := f.rec.messages()
	if len(msgs) != 4 {
		t.Fatalf("submitted %d: %+v", len(msgs), msgs)
	}
	key := msgs[0].ConversationKey()
	if key != "feishu:tenant1:oc_topics:om_t1" {
		t.Errorf("topic conversation key %q", key)
	}
	for _, m := range msgs[1:3] {
		if m.ConversationKey() != key {
			t.Errorf("%s in %s; want %s", m.ID, m.ConversationKey(), key)
		}
	}
	if msgs[3].ConversationKey() == key {
		t.Error("another topic shares the conversation")
	}
	if texts := []string{msgs[0].Text, msgs[1].Text, msgs[2].Text}; strings.Join(texts, "|") != "what is 2+2?|and 3+3?|thanks" {
		t.Errorf("texts %q", texts)
	}
}

func TestP2PChatIsOneConversation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.mustPost(t, feishutest.Message{MessageID: "om_p1", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("hello")})
	f.mustPost(t, feishutest.Message{MessageID: "om_p2", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("second")})
	msgs := f.rec.messages()
	if len(msgs) != 2 || msgs[0].ConversationKey() != msgs[1].ConversationKey() || msgs[0].Thread != "" || !msgs[0].DM {
		t.Fatalf("p2p messages %+v", msgs)
	}
	if f.api.BotInfoRequests() != 0 {
		t.Error("a direct message needed the bot's identity")
	}
	if err := f.ch.Send(context.Background(), msgs[1], channels.Reply{Text: "hi there"}); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].Kind != "create" || sent[0].ChatID != "oc_dm" || sent[0].Text != "hi there" {
		t.Fatalf("p2p reply %+v", sent)
	}
}

func TestPostMessageFlattened(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	post := map[string]any{
		"title": "Question",
		"content": [][]map[string]any{
			{{"tag": "at", "user_id": "@_user_1", "user_name": "Parley"}, {"tag": "text", "text": " see "}, {"tag": "a", "text": "the doc", "href": "https://example.com/d"}},
			{{"tag": "text", "text": "ask "}, {"tag": "at", "user_id": "@_user_2", "user_name": "Bob"}, {"tag": "img", "image_key": "img_1"}},
			{{"tag": "code_block", "language": "GO", "text": "func main() {\n\tprintln(1)\n}\n"}},
			{{"tag": "emotion", "emoji_type": "SMILE"}},
		},
	}
	content, _ := json.Marshal(post)
	f.mustPost(t, feishutest.Message{MessageID: "om_post", ChatID: "oc_g", ChatType: "group", Sender: "ou_a", MsgType: "post",
		Content: string(content), Mentions: []feishutest.Mention{mentionBot(), {Key: "@_user_2", OpenID: "ou_bob", Name: "Bob"}}})
	msgs := f.rec.messages()
	if len(msgs) != 1 {
		t.Fatalf("post not submitted: %+v", msgs)
	}
	want := "Question\nsee [the doc](https://example.com/d)\nask @Bob[image]\n```go\nfunc main() {\n\tprintln(1)\n}\n```\n:SMILE:"
	if msgs[0].Text != want {
		t.Fatalf("flattened post:\n%q\nwant\n%q", msgs[0].Text, want)
	}
}

func TestPostWithLocaleWrapper(t *testing.T) {
	t.Parallel()
	text, ok := flattenPost(`{"zh_cn":{"title":"T","content":[[{"tag":"text","text":"body"}]]}}`)
	if !ok || text != "T\nbody" {
		t.Fatalf("flattenPost = %q, %v", text, ok)
	}
}

// The adapter never answers a sticker itself: it hands it to the gateway
// with the note, so that the access rules decide whether the sender hears
// anything (the gateway's tests show a stranger does not).
func TestAccessBeforeUnsupportedNoteFeishuHandsTheStickerOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	img := feishutest.Message{MessageID: "om_img", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", MsgType: "sticker", Content: `{"file_key":"file_x"}`}
	f.mustPost(t, img)
	f.mustPost(t, img) // a re-push: the gateway's de-duplication drops it
	msgs := f.rec.messages()
	if len(msgs) != 1 || msgs[0].Unsupported != UnsupportedNote || msgs[0].Text != "" || msgs[0].User != "ou_a" || !msgs[0].DM {
		t.Fatalf("submitted: %+v", msgs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = f.ch.Run(ctx, f.rec)
	if sent := f.api.Sent(); len(sent) != 0 {
		t.Fatalf("the adapter answered the sticker itself: %+v", sent)
	}
	// An image in a group, outside any thread the bot is in, is not
	// handed over at all.
	f2 := newFixture(t, nil)
	f2.mustPost(t, feishutest.Message{MessageID: "om_gimg", ChatID: "oc_g", ChatType: "group", Sender: "ou_a", MsgType: "image", Content: `{"image_key":"img_x"}`})
	if msgs := f2.rec.messages(); len(msgs) != 0 {
		t.Fatalf("group image handed over: %+v", msgs)
	}
}

func TestMentionPlaceholders(t *testing.T) {
	t.Parallel()
	ms := []mention{{key: "@_user_1", openID: "ou_bot", name: "Parley"}, {key: "@_user_10", openID: "ou_x", name: "Ten"}, {key: "@_user_2", openID: "ou_y"}}
	got := resolveMentions("@_user_1 ask @_user_10 and @_user_2", ms, "ou_bot")
	if got != "ask @Ten and @user" {
		t.Fatalf("resolveMentions = %q", got)
	}
	if got := resolveMentions("hi @_user_1", ms, "ou_bot"); got != "hi" {
		t.Fatalf("trailing bot mention: %q", got)
	}
}
