package feishu

import (
	"context"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestRepliesToAPostedRootAreItsThreadInEveryGroup: a post at a group's
// top level (a trigger's root) starts a thread that people's replies
// continue without a mention, in the conversation the trigger's later
// work addresses (Address with the root's id), in a normal group and in
// a topic group, whose events name the topic by an omt_ id as well.
func TestRepliesToAPostedRootAreItsThreadInEveryGroup(t *testing.T) {
	t.Parallel()
	for _, chatType := range []string{"group", "topic_group"} {
		t.Run(chatType, func(t *testing.T) {
			t.Parallel()
			r := redistest.New(t)
			f := newFixture(t, func(c *Config, o *Options) { o.Redis, o.Prefix = r.Client, r.Prefix })
			ctx := context.Background()
			top := channels.Message{Channel: Name, Workspace: "tenant1", Chat: "oc_ops"}
			root, err := f.ch.Post(ctx, top, f.ch.Parts(top, channels.Reply{Text: "🔥 DiskFull"})[0])
			if err != nil {
				t.Fatal(err)
			}
			work := top
			work.Thread = root
			f.ch.Address(&work)
			f.mustPost(t, feishutest.Message{MessageID: "om_reply", ChatID: "oc_ops", ChatType: chatType, Sender: "ou_alice",
				RootID: root, ParentID: root, ThreadID: "omt_ops", Content: feishutest.Text("on it — was it the backup job?")})
			msgs := f.rec.messages()
			if len(msgs) != 1 {
				t.Fatalf("%d messages submitted; want the reply, answered without a mention", len(msgs))
			}
			if got, want := msgs[0].ConversationKey(), work.ConversationKey(); got != want {
				t.Errorf("the reply is in %q; the trigger's work in %q", got, want)
			}
			if msgs[0].Meta[MetaThreadID] != "omt_ops" {
				t.Errorf("thread id %q; want omt_ops kept for reading the room", msgs[0].Meta[MetaThreadID])
			}
		})
	}
}
