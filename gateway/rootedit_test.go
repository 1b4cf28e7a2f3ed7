package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/triggers"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// editingPoster is a threadPoster whose posts can be edited, as Slack's
// and Feishu's can; failEdits makes the next edits fail.
type editingPoster struct {
	*threadPoster
	emu       sync.Mutex
	edits     []edit
	attempts  int
	failEdits []error
}

type edit struct{ id, part string }

func (p *editingPoster) Edit(_ context.Context, _ channels.Message, id, part string) error {
	p.emu.Lock()
	defer p.emu.Unlock()
	p.attempts++
	if len(p.failEdits) > 0 {
		err := p.failEdits[0]
		p.failEdits = p.failEdits[1:]
		return err
	}
	p.edits = append(p.edits, edit{id, part})
	return nil
}

func (p *editingPoster) edited() ([]edit, int) {
	p.emu.Lock()
	defer p.emu.Unlock()
	return append([]edit(nil), p.edits...), p.attempts
}

// waitEdits waits until n edits were made, or a generous deadline.
func (p *editingPoster) waitEdits(t *testing.T, n int) []edit {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		edits, _ := p.edited()
		if len(edits) >= n {
			return edits
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d edits, want %d", len(edits), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newEditGateway is newThreadGateway of a channel ch (an editingPoster or
// not), counting into m.
func newEditGateway(t *testing.T, ch channels.Channel, cfg gateway.Config, m *metrics.Metrics) *gateway.Gateway {
	t.Helper()
	rd := redistest.New(t)
	store := sessions.NewRedis(rd.Client, sessions.Options{Prefix: rd.Prefix, LockTTL: time.Second})
	cfg.Threads = triggers.NewThreads(rd.Client, rd.Prefix)
	gw := gateway.New(cfg, store, nil, m, nil)
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() { _ = gw.Shutdown(context.Background()) })
	return gw
}

// alertWork is notification i of group g: its text, and its root text.
func alertWork(i int, status string) triggers.Work {
	return triggers.Work{ID: fmt.Sprint("n", i), Trigger: "webhook:am", To: dest, Answer: triggers.AnswerPost,
		Text: fmt.Sprintf("%s DiskFull #%d", status, i), RootText: "root: " + status + fmt.Sprint(" #", i),
		Group: "{}:{alertname=\"DiskFull\"}", Resolved: status == "RESOLVED"}
}

// TestResolutionEditsTheRootOnceAndFiringAgainEditsItBack: the root is
// edited when the group's state changes, not on every notification.
func TestResolutionEditsTheRootOnceAndFiringAgainEditsItBack(t *testing.T) {
	t.Parallel()
	p := &editingPoster{threadPoster: &threadPoster{recorder: newRecorder("slack")}}
	gw := newEditGateway(t, p, gateway.Config{}, nil)
	ctx := context.Background()
	statuses := []string{"FIRING", "FIRING", "RESOLVED", "RESOLVED", "FIRING"}
	for i, status := range statuses {
		if err := gw.SubmitWork(ctx, alertWork(i, status)); err != nil {
			t.Fatal(err)
		}
	}
	replies := p.wait(t, len(statuses)-1)
	for i, r := range replies {
		if want := alertWork(i+1, statuses[i+1]).Text; r.msg.Thread != "ts-1" || r.reply.Text != want {
			t.Errorf("reply %d = %q in %q; want %q in the thread", i, r.reply.Text, r.msg.Thread, want)
		}
	}
	edits := p.waitEdits(t, 2)
	if len(edits) != 2 || edits[0] != (edit{"ts-1", "root: RESOLVED #2"}) || edits[1] != (edit{"ts-1", "root: FIRING #4"}) {
		t.Fatalf("edits %+v; want the root edited to resolved once, then back to firing", edits)
	}
	if roots, _ := p.posted(); len(roots) != 1 {
		t.Errorf("%d root posts; want 1", len(roots))
	}
}

// TestRootEditThatFailsIsTriedAgainAndNeverHoldsTheReply: a rate-limited
// edit is tried again until it is made; the reply in the thread went out
// meanwhile. An edit refused for good is counted and given up, and the
// group goes on.
func TestRootEditThatFailsIsTriedAgainAndNeverHoldsTheReply(t *testing.T) {
	t.Parallel()
	limited := &channels.PostError{Retry: true, Err: errors.New("ratelimited")}
	p := &editingPoster{threadPoster: &threadPoster{recorder: newRecorder("slack")},
		failEdits: []error{limited, limited, limited, &channels.PostError{Err: errors.New("cant_update_message")}}}
	m := metrics.New()
	gw := newEditGateway(t, p, gateway.Config{RetryMax: time.Millisecond}, m)
	ctx := context.Background()
	for i, status := range []string{"FIRING", "RESOLVED", "FIRING"} {
		if err := gw.SubmitWork(ctx, alertWork(i, status)); err != nil {
			t.Fatal(err)
		}
	}
	replies := p.wait(t, 2)
	if replies[0].reply.Text != "RESOLVED DiskFull #1" || replies[1].reply.Text != "FIRING DiskFull #2" {
		t.Fatalf("replies %+v", replies)
	}
	// The resolution's edit fails three times, then is refused for good;
	// firing again edits the root back.
	edits := p.waitEdits(t, 1)
	if _, attempts := p.edited(); len(edits) != 1 || edits[0] != (edit{"ts-1", "root: FIRING #2"}) || attempts != 5 {
		t.Fatalf("edits %+v after %d attempts; want the last one made after the first's four failures", edits, attempts)
	}
	for outcome, want := range map[string]float64{metrics.DeliveryRetried: 3, metrics.DeliveryFailed: 1, metrics.DeliverySent: 1} {
		if got := testutil.ToFloat64(m.Deliveries.WithLabelValues("slack", outcome)); got != want {
			t.Errorf("parley_deliveries_total{outcome=%q} = %v; want %v", outcome, got, want)
		}
	}
}

// TestRootOfAPlatformThatCannotEditKeepsItsText: without Editor the reply
// in the thread is all, and nothing fails.
func TestRootOfAPlatformThatCannotEditKeepsItsText(t *testing.T) {
	t.Parallel()
	p := &threadPoster{recorder: newRecorder("slack")}
	gw := newEditGateway(t, p, gateway.Config{}, nil)
	ctx := context.Background()
	for i, status := range []string{"FIRING", "RESOLVED", "FIRING"} {
		if err := gw.SubmitWork(ctx, alertWork(i, status)); err != nil {
			t.Fatal(err)
		}
	}
	replies := p.wait(t, 2)
	if replies[0].msg.Thread != "ts-1" || replies[1].reply.Text != "FIRING DiskFull #2" {
		t.Fatalf("replies %+v", replies)
	}
	if roots, texts := p.posted(); len(roots) != 1 || texts[0] != "FIRING DiskFull #0" {
		t.Errorf("root posts %q; want the first notification's only", texts)
	}
}

// TestSubmittedWorkCannotEditAPost: editing is the gateway's own; a
// source naming a post to rewrite is refused.
func TestSubmittedWorkCannotEditAPost(t *testing.T) {
	t.Parallel()
	p := &editingPoster{threadPoster: &threadPoster{recorder: newRecorder("slack")}}
	gw := newEditGateway(t, p, gateway.Config{}, nil)
	w := alertWork(0, "FIRING")
	w.EditRoot = "ts-someone-elses"
	if err := gw.SubmitWork(context.Background(), w); err == nil {
		t.Fatal("SubmitWork accepted work naming a post to edit")
	}
	if _, attempts := p.edited(); attempts != 0 {
		t.Errorf("%d edits attempted", attempts)
	}
}
