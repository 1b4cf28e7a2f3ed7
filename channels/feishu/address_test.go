package feishu

import (
	"context"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// TestAddressedWorkStartsAndContinuesAThread: a trigger's first post goes
// to the chat, and its later ones, addressed to that post, reply in its
// thread.
func TestAddressedWorkStartsAndContinuesAThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	root := channels.Message{Channel: Name, Chat: "oc_ops"}
	f.ch.Address(&root)
	rootID, err := f.ch.Post(ctx, root, f.ch.Parts(root, channels.Reply{Text: "FIRING DiskFull"})[0])
	if err != nil || rootID == "" {
		t.Fatalf("root: %q %v", rootID, err)
	}
	reply := channels.Message{Channel: Name, Chat: "oc_ops", Thread: rootID}
	f.ch.Address(&reply)
	if _, err := f.ch.Post(ctx, reply, f.ch.Parts(reply, channels.Reply{Text: "RESOLVED DiskFull"})[0]); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 2 || sent[0].Kind != "create" || sent[0].ChatID != "oc_ops" {
		t.Fatalf("root sent as %+v", sent)
	}
	if sent[1].Kind != "reply" || sent[1].ReplyTo != rootID || !sent[1].ReplyInThread {
		t.Fatalf("later work sent as %+v; want a reply in the root's thread", sent[1])
	}
}
