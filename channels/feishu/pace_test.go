package feishu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestTwoReplicasShareAChatsPace: two adapters on one Redis (two
// replicas) answer in one chat at once; Feishu's five messages a second
// per chat hold for both together, measured from the fake's receive
// times.
func TestTwoReplicasShareAChatsPace(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := newFixture(t, func(_ *Config, o *Options) {
		o.Redis, o.Prefix, o.ChatInterval = r.Client, r.Prefix, DefaultChatInterval
	})
	other, err := New(f.ch.cfg, Options{Redis: r.Client, Prefix: r.Prefix, RetryBase: 10 * time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, a := range []*Adapter{f.ch, other} {
		for j := range 5 {
			wg.Go(func() {
				m := groupMsg()
				m.Meta = map[string]string{MetaMessageID: fmt.Sprintf("om_%d_%d", i, j), MetaChatType: "group"}
				if err := a.Send(context.Background(), m, channels.Reply{Text: fmt.Sprintf("answer %d.%d", i, j), Notice: true}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	sent := f.api.Sent()
	if len(sent) != 10 {
		t.Fatalf("%d messages, want 10", len(sent))
	}
	// The k-th message (oldest first) takes the k-th slot of the chat's
	// budget, which cannot come before start plus k intervals: a loaded
	// machine delays a send but never moves a slot earlier, so this bound
	// holds however late any one message arrives. Unpaced, all ten land
	// within milliseconds of start.
	slices.SortFunc(sent, func(a, b feishutest.Sent) int { return a.At.Compare(b.At) })
	for k, p := range sent {
		earliest := time.Duration(k) * DefaultChatInterval
		if got := p.At.Sub(start); got < earliest-DefaultChatInterval/10 {
			t.Errorf("message %d of one chat was sent %v after the first try; Feishu's pace allows it no sooner than %v", k+1, got, earliest)
		}
	}
}
