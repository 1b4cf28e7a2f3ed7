package feishu

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// TestPostPartsByIndex: the outbox's parts carry their index into the
// uuid, so a part posted again is dropped by Feishu, while the same
// paragraph at another place of the answer is posted.
func TestPostPartsByIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(_ *Config, o *Options) { o.ChunkBytes = 60 })
	para := strings.Repeat("same ", 10) + "end."
	answer := para + "\n\n" + para + "\n\n" + "last one"
	parts := f.ch.Parts(groupMsg(), channels.Reply{Text: answer})
	if len(parts) != 3 {
		t.Fatalf("%d parts: %q", len(parts), parts)
	}
	ctx := context.Background()
	var ids []string
	for _, p := range parts {
		id, err := f.ch.Post(ctx, groupMsg(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	sent := f.api.Sent()
	if len(sent) != 3 || sent[0].Text != para || sent[1].Text != para || sent[2].Text != "last one" || !sent[0].ReplyInThread {
		t.Fatalf("sent %+v; want the three parts, the repeated paragraph twice", sent)
	}
	// A part posted again (its answer lost on the way back) is dropped,
	// and answers with the message it made.
	id, err := f.ch.Post(ctx, groupMsg(), parts[1])
	if err != nil || id != ids[1] || f.api.Duplicates() != 1 || len(f.api.Sent()) != 3 {
		t.Fatalf("repost: id %q (want %q), err %v, %d duplicates, %d sent", id, ids[1], err, f.api.Duplicates(), len(f.api.Sent()))
	}
	if ok, _ := f.ch.state.followed(ctx, "oc_g:om_q"); !ok {
		t.Error("the answered thread was not remembered")
	}
}

func TestPostClassifiesFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	part := f.ch.Parts(groupMsg(), channels.Reply{Text: "hello"})[0]
	ctx := context.Background()
	for _, tc := range []struct {
		fail  feishutest.Failure
		retry bool
	}{
		{feishutest.Failure{Status: 503, Code: 1000004, Msg: "internal error"}, true},
		{feishutest.Failure{Status: 400, Code: 230020, Msg: "frequency limit"}, true},
		{feishutest.Failure{Status: 400, Code: 230002, Msg: "bot not in chat"}, false},
	} {
		f.api.Fail("reply", tc.fail, tc.fail) // the card, then (if refused) the text
		_, err := f.ch.Post(ctx, groupMsg(), part)
		f.api.Heal("reply")
		if again, _ := channels.Retryable(err); err == nil || again != tc.retry {
			t.Errorf("code %d: err %v, retryable %v; want %v", tc.fail.Code, err, again, tc.retry)
		}
	}
	if _, err := f.ch.Post(ctx, groupMsg(), "not a part"); err == nil {
		t.Error("a part that is not Feishu's was posted")
	} else if again, _ := channels.Retryable(err); again {
		t.Error("a malformed part is retried")
	}
	if ok, _ := f.ch.state.followed(ctx, "oc_g:om_q"); ok {
		t.Error("a thread counts as answered though nothing was posted")
	}
	// A notice's parts do not mark the thread.
	notice := f.ch.Parts(groupMsg(), channels.Reply{Text: "refused", Notice: true})[0]
	if _, err := f.ch.Post(ctx, groupMsg(), notice); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.ch.state.followed(ctx, "oc_g:om_q"); ok {
		t.Error("a notice marked the thread answered")
	}
}
