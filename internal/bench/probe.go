package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/gateway"
)

// Probe is the ack probe's figures: webhooks timed while a slow model
// holds every worker, so that nothing but the webhook itself runs in
// parley, and the Redis round trips those webhooks alone made.
type Probe struct {
	Workers       int             // turns held by the model during the probe
	Ack           []time.Duration // one per probe webhook, sent one after another
	WebhookTrips  float64         // Redis round trips per probe webhook
	Lost, Doubled int             // of the held and the probe messages, once released
}

// heldModel answers like echoModel, but only once released: until then
// every request waits, holding the worker that made it.
type heldModel struct {
	inflight atomic.Int64
	release  chan struct{}
}

func (h *heldModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.inflight.Add(1)
	select {
	case <-h.release:
	case <-r.Context().Done():
		return
	}
	echoModel(w, r)
}

// runProbe starts a fresh Redis and parley, occupies every worker with a
// turn the model holds, then sends n webhooks into other conversations one
// at a time. Each is acknowledged after its one Redis script (de-duplication,
// thread mark, enqueue) with no turn competing for the process, so the ack
// times are the webhook path's own; the change in Redis's
// total_writes_processed over them is the webhook's share of the round
// trips. Then the model is released and every message must be answered
// once.
func runProbe(ctx context.Context, o Options, n int) (Probe, error) {
	pr := Probe{Workers: gateway.DefaultSection().Workers}
	hm := &heldModel{release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(hm.release)
		}
	}
	// Released before the rig stops, so that parley's held turns end.
	rg, err := startRig(ctx, o, "parley-bench-probe-", hm, "")
	if err != nil {
		release()
		return pr, err
	}
	defer rg.stop()
	defer release()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	url := rg.p.base + "/slack/events"
	waits, err := occupyWorkers(ctx, rg, hm, client, url, pr.Workers)
	if err != nil {
		return pr, err
	}
	w0, err := rg.rds.writes(ctx)
	if err != nil {
		return pr, err
	}
	// The probe's messages go to conversations no worker holds, so each
	// is queued behind the held turns.
	for i := 0; i < n; i++ {
		id := pr.Workers + i
		waits = append(waits, rg.fs.expect(id))
		ack, _, err := post(ctx, client, url, event(id, id%32))
		if err != nil {
			return pr, err
		}
		pr.Ack = append(pr.Ack, ack)
	}
	w1, err := rg.rds.writes(ctx)
	if err != nil {
		return pr, err
	}
	// The INFO that read w0 is counted in w1.
	pr.WebhookTrips = float64(w1-w0-1) / float64(n)
	if got := hm.inflight.Load(); got != int64(pr.Workers) {
		return pr, fmt.Errorf("ack probe: the model saw %d requests while it held %d workers; the probe did not isolate the webhook", got, pr.Workers)
	}
	release()
	if err := awaitAnswers(ctx, o, waits); err != nil {
		return pr, err
	}
	time.Sleep(500 * time.Millisecond) // a late double is seen
	pr.Lost, pr.Doubled = rg.fs.lostAndDoubled(pr.Workers + n)
	return pr, nil
}

// occupyWorkers sends one message in each of workers conversations and
// waits until every worker has taken one and waits for the model.
func occupyWorkers(ctx context.Context, rg *rig, hm *heldModel, client *http.Client, url string, workers int) ([]<-chan answer, error) {
	var waits []<-chan answer
	for id := 0; id < workers; id++ {
		waits = append(waits, rg.fs.expect(id))
		if _, _, err := post(ctx, client, url, event(id, id%32)); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for hm.inflight.Load() < int64(workers) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ack probe: %d of %d workers reached the model within 30 s", hm.inflight.Load(), workers)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return waits, nil
}

// awaitAnswers waits for each answer, up to o.Timeout each.
func awaitAnswers(ctx context.Context, o Options, waits []<-chan answer) error {
	for _, ch := range waits {
		select {
		case <-ch:
		case <-time.After(o.Timeout):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// lostAndDoubled counts messages 0 to n-1 answered never and more than
// once.
func (fs *fakeSlack) lostAndDoubled(n int) (lost, doubled int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for id := 0; id < n; id++ {
		switch len(fs.answers[id]) {
		case 0:
			lost++
		case 1:
		default:
			doubled++
		}
	}
	return lost, doubled
}

func printProbe(out io.Writer, pr Probe, n int) {
	fmt.Fprintf(out, "ack probe: %d webhooks one at a time while the model holds all %d workers\n", n, pr.Workers)
	fmt.Fprintf(out, "  ack p50 %s p99 %s; Redis round trips per webhook %.2f; lost %d, doubled %d\n",
		ms(Percentile(pr.Ack, 50)), ms(Percentile(pr.Ack, 99)), pr.WebhookTrips, pr.Lost, pr.Doubled)
}
