package feishu

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
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
	most := 0
	for _, p := range sent {
		n := 0
		for _, q := range sent {
			if !q.At.Before(p.At) && q.At.Sub(p.At) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	// Five a second, with room for one late arrival; unpaced, all ten
	// land within milliseconds.
	if most > 6 {
		t.Fatalf("%d messages within one second of one chat; the replicas burst past Feishu's pace", most)
	}
}
