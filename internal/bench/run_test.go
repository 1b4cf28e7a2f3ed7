package bench

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/parleybin"
)

// needServers skips a test that runs parley serve and redis-server in
// -short mode or where there is no redis-server.
func needServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs parley serve and redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
}

// TestSmoke runs the whole bench once, briefly, in each way it sends: 50
// messages, each in its own channel and thread, through a real parley
// serve and redis-server, from 8 senders in a closed loop and at 200 a
// second in an open one.
func TestSmoke(t *testing.T) {
	t.Parallel()
	needServers(t)
	for _, tc := range []struct {
		load  load
		label string
		// 8 senders at once need more connections than the warm-up's
		// one; 200 a second, each answered in a few ms, may need none.
		newConns bool
	}{
		{load{c: 8}, "c=8 median of 1 runs", true},
		{load{rate: 200}, "rate=200/s median of 1 runs", false},
	} {
		t.Run(tc.load.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			o := Options{Parley: parleybin.Path(t), Messages: 50, Runs: 1, Timeout: 30 * time.Second}
			r, err := runOnce(ctx, o, tc.load, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost != 0 || r.Doubled != 0 || r.Misrouted != 0 {
				t.Fatalf("lost %d, doubled %d, misrouted %d", r.Lost, r.Doubled, r.Misrouted)
			}
			if len(r.E2E) != 50 || len(r.Ack) != 50 {
				t.Fatalf("%d end-to-end and %d ack samples for 50 messages", len(r.E2E), len(r.Ack))
			}
			if r.RedisWritesPerMessage < 1 || r.IdleRSS == 0 || tc.newConns && (r.ModelConns < 1 || r.SlackConns < 1) {
				t.Fatalf("implausible figures: %+v", r)
			}
			if r.ServerAck.Count() != 50 {
				t.Fatalf("parley timed %v webhooks of the run's 50", r.ServerAck.Count())
			}
			var out bytes.Buffer
			printRun(&out, 1, r)
			printMedians(&out, []Result{r}, 1)
			for _, want := range []string{"e2e p50", "CPU", "idle RSS", "lost 0, doubled 0, misrouted 0", tc.label,
				"of which webhook 1.00 (ack probe), turn", "ack in parley: p99 ≤", "Slack API calls"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestIdleMakeupOfAServer measures one idle parley serve (a binary built
// with its symbols, which `go test`'s own binaries lack): its code in
// windows shared out by package, the Redis client's and net/http's among
// them, adding up to no more than the windows there are.
func TestIdleMakeupOfAServer(t *testing.T) {
	t.Parallel()
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mk, err := idleOnce(ctx, Options{Parley: parleybin.Path(t)})
	if err != nil {
		t.Fatal(err)
	}
	var shares float64
	for _, n := range mk.Packages {
		shares += n
	}
	for _, pkg := range []string{"runtime", "net/http", "github.com/redis/go-redis/v9"} {
		if mk.Packages[pkg] <= 0 {
			t.Errorf("no window of %s's code: %v", pkg, mk.Packages)
		}
	}
	if shares > float64(mk.Windows)+0.001 || shares < 1 {
		t.Errorf("windows by package add up to %.2f of %d", shares, mk.Windows)
	}
	var out bytes.Buffer
	printIdle(&out, 1, mk)
	for _, want := range []string{"RssAnon", "windows of 64 KiB", ".text windows by package", "net/http"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSlackCallsWithContextOnAndOff: reading each mention's thread back
// costs one conversations.replies per answered message, and the names of
// its two writers at most once (cached across threads); with -context off
// neither is called. (The other calls, the post and, on a slow machine,
// the typing reaction, are the same either way.)
func TestSlackCallsWithContextOnAndOff(t *testing.T) {
	t.Parallel()
	needServers(t)
	calls, reads := map[bool]float64{}, map[bool]float64{}
	for _, off := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		o := Options{Parley: parleybin.Path(t), Messages: 40, Runs: 1, Timeout: 30 * time.Second, NoContext: off}
		r, err := runOnce(ctx, o, load{c: 4}, "")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if r.Lost != 0 || r.Doubled != 0 || r.Misrouted != 0 {
			t.Fatalf("context off=%v: lost %d, doubled %d, misrouted %d", off, r.Lost, r.Doubled, r.Misrouted)
		}
		calls[off], reads[off] = r.SlackCallsPerMessage, r.SlackReadsPerMessage
	}
	t.Logf("Slack API calls per answered message: %.2f with the room (%.2f reading it), %.2f without", calls[false], reads[false], calls[true])
	if calls[true] < 1 || reads[true] != 0 || reads[false] < 1 || reads[false] > 1+2.0/40 {
		t.Fatalf("room reads per message: %.2f with the room, %.2f without; want 1 (and two name lookups at most) and 0", reads[false], reads[true])
	}
}

// TestAckProbe runs the ack probe briefly: every worker is held by the
// model while the probe's webhooks are sent, each costs one Redis round
// trip, and once the model answers every message is answered once.
func TestAckProbe(t *testing.T) {
	t.Parallel()
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := Options{Parley: parleybin.Path(t), Timeout: 30 * time.Second}
	pr, err := runProbe(ctx, o, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Ack) != 20 || pr.Lost != 0 || pr.Doubled != 0 {
		t.Fatalf("%d acks for 20 webhooks, lost %d, doubled %d", len(pr.Ack), pr.Lost, pr.Doubled)
	}
	// One script per webhook; parley's own background calls (the Redis
	// health check) may add a little over the probe.
	if pr.WebhookTrips < 1 || pr.WebhookTrips > 1.5 {
		t.Fatalf("%.2f Redis round trips per webhook, want 1", pr.WebhookTrips)
	}
	var out bytes.Buffer
	printProbe(&out, pr, 20)
	if !strings.Contains(out.String(), "ack p50") || !strings.Contains(out.String(), "round trips per webhook 1.") {
		t.Errorf("probe output:\n%s", out.String())
	}
}

// TestCallsAndThreadSeries runs the calls series and the thread series
// briefly: an instant answer is one post and no stream; a streamed one is
// one stream, started and stopped, and no post; on Feishu an instant
// answer is one reply, a streamed one a card sent in one reply; in one thread the first
// slack.post_burst (3) answers come at once and the later ones at the
// channel's pace of about one a second.
func TestCallsAndThreadSeries(t *testing.T) {
	t.Parallel()
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := Options{Parley: parleybin.Path(t), Calls: 8, Timeout: 30 * time.Second, NoContext: true}
	instant, err := runCalls(ctx, o, "instant", http.HandlerFunc(echoModel))
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := runCalls(ctx, o, "streamed", streamedModel(10, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printCalls(&out, "Slack", []CallsResult{instant, streamed})
	t.Log("\n" + out.String())
	for _, r := range []CallsResult{instant, streamed} {
		if r.Lost != 0 || r.Doubled != 0 || len(r.E2E) != 8 {
			t.Fatalf("%s: lost %d, doubled %d, %d answers timed of 8", r.Model, r.Lost, r.Doubled, len(r.E2E))
		}
	}
	if p := instant.PerAnswer; p["chat.postMessage"] != 1 || p["chat.startStream"] != 0 {
		t.Errorf("instant answer: %v; want one post and no stream", p)
	}
	if p := streamed.PerAnswer; p["chat.postMessage"] != 0 || p["chat.startStream"] != 1 || p["chat.stopStream"] != 1 {
		t.Errorf("streamed answer: %v; want one stream started and stopped, and no post", p)
	}
	if Percentile(streamed.E2E, 50) < 2*time.Second {
		t.Errorf("streamed answers complete in %s, before the model's 2 s", Percentile(streamed.E2E, 50))
	}

	fi, err := runFeishuCalls(ctx, o, "instant", http.HandlerFunc(echoModel), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	fst, err := runFeishuCalls(ctx, o, "streamed", streamedModel(10, 2*time.Second),
		func(text string) bool { return strings.Contains(text, "word9") })
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printCalls(&out, "Feishu Open", []CallsResult{fi, fst})
	t.Log("\n" + out.String())
	for _, r := range []CallsResult{fi, fst} {
		if r.Lost != 0 || r.Doubled != 0 || len(r.E2E) != 8 {
			t.Fatalf("feishu %s: lost %d, doubled %d, %d answers timed of 8", r.Model, r.Lost, r.Doubled, len(r.E2E))
		}
	}
	if p := fi.PerAnswer; p["POST im/v1/messages/:id/reply"] != 1 || p["POST cardkit/v1/cards"] != 0 {
		t.Errorf("feishu instant answer: %v; want one reply and no card", p)
	}
	if p := fst.PerAnswer; p["POST im/v1/messages/:id/reply"] != 1 || p["POST cardkit/v1/cards"] != 1 {
		t.Errorf("feishu streamed answer: %v; want one card, sent in one reply", p)
	}

	o = Options{Parley: parleybin.Path(t), Thread: 5, Threads: 2, Timeout: 30 * time.Second, NoContext: true}
	th, err := runThread(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printThread(&out, th)
	t.Log("\n" + out.String())
	st := indexStats(th.Lat)
	for i, s := range st {
		if s.Answered != 2 {
			t.Fatalf("message %d answered in %d threads of 2", i+1, s.Answered)
		}
	}
	if st[0].P50 > 700*time.Millisecond || st[4].P50 < 700*time.Millisecond {
		t.Errorf("the first answer in %s, the fifth in %s: want the burst at once and then about one a second", st[0].P50, st[4].P50)
	}
}
