// Package bench drives a real `parley serve` the way Slack does and
// measures what one replica costs: latency, CPU, Redis round trips, new
// upstream connections and idle memory. cmd/parley-bench is its command
// line; scripts/bench runs it.
package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Options says what to measure.
type Options struct {
	Parley      string // the parley binary to run
	Concurrency []int  // senders per run; each waits for its answer before its next message
	// Rates are messages a second, one series each, sent on time whatever
	// the answers' pace (an open loop, as a platform sends): the latency
	// at a given load, where the closed loop of Concurrency always runs
	// the machine as fast as it goes.
	Rates       []int
	Users       int           // Slack users the messages come from
	Messages    int           // messages a run
	Runs        int           // runs per concurrency; the medians are over these
	RedisOutage time.Duration // if > 0: one run, kill -9 Redis halfway, restart after this
	Timeout     time.Duration // how long a sender waits for an answer before counting it lost
	// AckProbe is how many webhooks the ack probe sends while the model
	// holds every worker (0: no probe). It runs before the series, and
	// its webhook round trips split the series' into webhook and turn.
	AckProbe int
	// RedisFsync is the bench Redis's appendfsync: "always" or "everysec".
	// Empty: everysec, as Redis is deployed (deploy/compose.yaml), except
	// with RedisOutage, whose kill -9 must lose no acknowledged write.
	RedisFsync string
	// ProfileDir, if set, receives a CPU and an allocation profile of
	// parley for each run (DIR/c32-run1/cpu.pprof, …). Parley must be
	// built with -tags parleyprofile.
	ProfileDir string
	// NoContext turns reading the room off (policies.default.context.thread:
	// false), to compare the platform API calls of an answer without it.
	NoContext bool
	// Calls, if > 0: only the calls series, this many messages answered
	// by the instant model and as many by the streamed one.
	Calls int
	// Feishu: the calls series also counts Feishu's Open API calls, on
	// a fake Feishu app parley serves beside Slack.
	Feishu bool
	// Thread, if > 0: only the thread series, this many messages in each
	// of Threads threads (default 1).
	Thread, Threads int
}

func (o Options) redisFsync() string {
	switch {
	case o.RedisFsync != "":
		return o.RedisFsync
	case o.RedisOutage > 0:
		return "always"
	}
	return "everysec"
}

// Result is one run's figures.
type Result struct {
	Concurrency           int
	Rate                  int // messages a second, if the run was an open loop (Concurrency is then 0)
	Messages              int
	E2E, Ack              []time.Duration
	Elapsed               time.Duration
	CPUPerMessage         time.Duration // parley's user+system time / messages
	RedisWritesPerMessage float64       // round trips (INFO total_writes_processed)
	// RedisCommandsPerMessage is INFO total_commands_processed over the
	// run, per message: every command, pipelined ones one each.
	RedisCommandsPerMessage float64
	ModelConns, SlackConns  int64
	// SlackCallsPerMessage is the fake Slack's Web API calls over the run
	// (posts, reactions, thread reads, name lookups), per message;
	// SlackReadsPerMessage those that read the room.
	SlackCallsPerMessage, SlackReadsPerMessage float64
	// IdleRSS is VmRSS one second after start-up; IdleRssAnon and
	// IdleRssFile its anonymous and file-backed parts (/proc/PID/status).
	IdleRSS, IdleRssAnon, IdleRssFile uint64
	Lost, Doubled                     int
	Misrouted                         int
	Refused                           int // webhook attempts answered 503 or not at all; retried as Slack does
	OtherLoad                         float64
	// ServerAck is parley's own time for the run's webhooks, from its
	// parley_webhook_duration_seconds (empty if the binary has none).
	ServerAck Histogram
	// Outage figures (RedisOutage > 0 only).
	UnansweredAtKill int
	MaxAfterRestart  time.Duration
}

// Run measures every concurrency Runs times and writes each run and the
// medians to out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Calls > 0 || o.Thread > 0 {
		if o.Calls > 0 {
			if err := RunCalls(ctx, o, out); err != nil {
				return err
			}
		}
		if o.Thread > 0 {
			return RunThread(ctx, o, out)
		}
		return nil
	}
	if o.RedisOutage > 0 {
		r, err := runOnce(ctx, o, load{c: 32}, "")
		if err != nil {
			return err
		}
		printRun(out, 1, r)
		fmt.Fprintf(out, "  outage: %d accepted and unanswered at the kill; answered after Redis was back, max %s; %d webhook attempts refused\n",
			r.UnansweredAtKill, ms(r.MaxAfterRestart), r.Refused)
		return nil
	}
	webhookTrips := -1.0
	if o.AckProbe > 0 {
		pr, err := runProbe(ctx, o, o.AckProbe)
		if err != nil {
			return err
		}
		printProbe(out, pr, o.AckProbe)
		webhookTrips = pr.WebhookTrips
	}
	var loads []load
	for _, c := range o.Concurrency {
		loads = append(loads, load{c: c})
	}
	for _, r := range o.Rates {
		loads = append(loads, load{rate: r})
	}
	for _, l := range loads {
		var rs []Result
		for i := 1; i <= o.Runs; i++ {
			prof := ""
			if o.ProfileDir != "" {
				prof = filepath.Join(o.ProfileDir, fmt.Sprintf("%s-run%d", l.dir(), i))
			}
			r, err := runOnce(ctx, o, l, prof)
			if err != nil {
				return err
			}
			printRun(out, i, r)
			rs = append(rs, r)
		}
		printMedians(out, rs, webhookTrips)
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms" }

func printRun(out io.Writer, i int, r Result) {
	fmt.Fprintf(out, "%s run %d: %d messages in %.1f s (%.0f msg/s), other processes %.0f %% of the machine\n",
		r.load(), i, r.Messages, r.Elapsed.Seconds(), float64(r.Messages)/r.Elapsed.Seconds(), r.OtherLoad*100)
	fmt.Fprintf(out, "  e2e p50 %s p99 %s; ack p50 %s p99 %s\n", ms(Percentile(r.E2E, 50)), ms(Percentile(r.E2E, 99)),
		ms(Percentile(r.Ack, 50)), ms(Percentile(r.Ack, 99)))
	trips := strconv.FormatFloat(r.RedisWritesPerMessage, 'f', 2, 64) + "/msg, commands " +
		strconv.FormatFloat(r.RedisCommandsPerMessage, 'f', 2, 64) + "/msg"
	if r.RedisWritesPerMessage < 0 {
		trips = "n/a (Redis restarted)"
	}
	fmt.Fprintf(out, "  CPU %.3f ms/msg; Redis round trips %s; new connections: model %d, Slack %d; idle RSS %.1f MiB (anon %.1f, file %.1f)\n",
		float64(r.CPUPerMessage)/1e6, trips, r.ModelConns, r.SlackConns, float64(r.IdleRSS)/(1<<20),
		float64(r.IdleRssAnon)/(1<<20), float64(r.IdleRssFile)/(1<<20))
	if r.ServerAck.Count() > 0 {
		fmt.Fprintf(out, "  ack in parley: p99 ≤ %s, %.1f %% within 2 ms, mean %s\n", secs(r.ServerAck.Quantile(0.99)),
			r.ServerAck.ShareWithin(0.002)*100, secs(r.ServerAck.Mean()))
	}
	fmt.Fprintf(out, "  Slack API calls %.2f/msg, of which reading the room %.2f\n", r.SlackCallsPerMessage, r.SlackReadsPerMessage)
	fmt.Fprintf(out, "  lost %d, doubled %d, misrouted %d\n", r.Lost, r.Doubled, r.Misrouted)
}

func secs(s float64) string { return ms(time.Duration(s * 1e9)) }

// printMedians prints the medians of a series; webhookTrips, if not
// negative, is the ack probe's round trips per webhook, which splits the
// round trips per message into the webhook's and the turn's.
func printMedians(out io.Writer, rs []Result, webhookTrips float64) {
	if len(rs) == 0 {
		return
	}
	fig := func(name, unit string, f func(Result) float64) {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		med, lo, hi := Median(xs)
		fmt.Fprintf(out, "  %-28s %10.3f %s (%.3f–%.3f)\n", name, med, unit, lo, hi)
	}
	d := func(x time.Duration) float64 { return float64(x) / 1e6 }
	fmt.Fprintf(out, "%s median of %d runs:\n", rs[0].load(), len(rs))
	fig("end-to-end p50", "ms", func(r Result) float64 { return d(Percentile(r.E2E, 50)) })
	fig("end-to-end p99", "ms", func(r Result) float64 { return d(Percentile(r.E2E, 99)) })
	fig("webhook ack p99", "ms", func(r Result) float64 { return d(Percentile(r.Ack, 99)) })
	if !slices.ContainsFunc(rs, func(r Result) bool { return r.ServerAck.Count() == 0 }) {
		fig("ack in parley, mean", "ms", func(r Result) float64 { return r.ServerAck.Mean() * 1e3 })
		fig("ack in parley within 2 ms", "%", func(r Result) float64 { return r.ServerAck.ShareWithin(0.002) * 100 })
	}
	fig("Redis round trips", "/msg", func(r Result) float64 { return r.RedisWritesPerMessage })
	if webhookTrips >= 0 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, r.RedisWritesPerMessage)
		}
		med, _, _ := Median(xs)
		fmt.Fprintf(out, "    of which webhook %.2f (ack probe), turn %.2f\n", webhookTrips, med-webhookTrips)
	}
	fig("Redis commands", "/msg", func(r Result) float64 { return r.RedisCommandsPerMessage })
	fig("new connections to model", "", func(r Result) float64 { return float64(r.ModelConns) })
	fig("new connections to Slack", "", func(r Result) float64 { return float64(r.SlackConns) })
	fig("Slack API calls", "/msg", func(r Result) float64 { return r.SlackCallsPerMessage })
	fig("  of which reading the room", "/msg", func(r Result) float64 { return r.SlackReadsPerMessage })
	fig("gateway CPU", "ms/msg", func(r Result) float64 { return d(r.CPUPerMessage) })
	fig("idle RSS", "MiB", func(r Result) float64 { return float64(r.IdleRSS) / (1 << 20) })
	fig("  of which RssAnon", "MiB", func(r Result) float64 { return float64(r.IdleRssAnon) / (1 << 20) })
	fig("  of which RssFile", "MiB", func(r Result) float64 { return float64(r.IdleRssFile) / (1 << 20) })
	fig("throughput", "msg/s", func(r Result) float64 { return float64(r.Messages) / r.Elapsed.Seconds() })
	fig("other processes", "%", func(r Result) float64 { return r.OtherLoad * 100 })
	lost, doubled, mis := 0, 0, 0
	for _, r := range rs {
		lost, doubled, mis = lost+r.Lost, doubled+r.Doubled, mis+r.Misrouted
	}
	fmt.Fprintf(out, "  lost / doubled / misrouted, all runs: %d / %d / %d\n", lost, doubled, mis)
}

// sign is Slack's v0 request signature.
func sign(ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(signingSecret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// chanOf and threadTS are where message id is sent: an app mention that
// starts a thread in a channel of its own. Slack lets an app post about
// once a second to one channel, and parley paces its posts to that, so
// messages sent faster than that must be spread over channels: one each.
func chanOf(id int) string   { return fmt.Sprintf("CBENCH%06d", id) }
func threadTS(id int) string { return fmt.Sprintf("1700000000.%06d", id) }

// event is the Events API delivery of message id from user: an app
// mention starting its own thread in its own channel.
func event(id, user int) []byte { return eventIn(id, user, chanOf(id), threadTS(id)) }

// eventIn is the Events API delivery of message id from user: an app
// mention in thread of channel.
func eventIn(id, user int, channel, thread string) []byte {
	ts := fmt.Sprintf("1700001000.%06d", id)
	b, _ := json.Marshal(map[string]any{
		"token": "bench", "team_id": teamID, "api_app_id": "ABENCH", "type": "event_callback",
		"event_id": "EvBENCH" + strconv.Itoa(id), "event_time": time.Now().Unix(),
		"authorizations": []map[string]any{{"team_id": teamID, "user_id": botUserID, "is_bot": true}},
		"event": map[string]any{"type": "app_mention", "user": "UBENCH" + strconv.Itoa(user),
			"text": "<@" + botUserID + "> " + marker(id), "ts": ts, "event_ts": ts,
			"channel": channel, "thread_ts": thread},
	})
	return b
}

// post delivers one event as Slack does, retrying (with X-Slack-Retry-Num)
// when the webhook refuses or fails. It returns the time of the attempt
// that was accepted and how many were refused.
func post(ctx context.Context, client *http.Client, url string, body []byte) (time.Duration, int, error) {
	refused := 0
	for attempt := 0; ; attempt++ {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, refused, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", sign(ts, body))
		if attempt > 0 {
			req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(attempt))
			req.Header.Set("X-Slack-Retry-Reason", "http_error")
		}
		start := time.Now()
		resp, err := client.Do(req)
		took := time.Since(start)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return took, refused, nil
			}
		}
		if ctx.Err() != nil {
			return 0, refused, ctx.Err()
		}
		refused++
		if attempt >= 50 {
			return 0, refused, fmt.Errorf("webhook refused %d times (last: %v)", refused, err)
		}
		select {
		case <-ctx.Done():
			return 0, refused, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// load is how a run sends: c senders, each waiting for its answer before
// its next message, or (rate > 0) rate messages a second on time.
type load struct{ c, rate int }

func (l load) String() string {
	if l.rate > 0 {
		return fmt.Sprintf("rate=%d/s", l.rate)
	}
	return fmt.Sprintf("c=%d", l.c)
}

// dir names the profile folder of a run of l.
func (l load) dir() string {
	if l.rate > 0 {
		return fmt.Sprintf("rate%d", l.rate)
	}
	return fmt.Sprintf("c%d", l.c)
}

func (r Result) load() load { return load{c: r.Concurrency, rate: r.Rate} }

// warmUp sends message id and waits for its answer.
func warmUp(ctx context.Context, base string, fs *fakeSlack, id int, timeout time.Duration) error {
	wait := fs.expect(id)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	if _, _, err := post(ctx, client, base+"/slack/events", event(id, 0)); err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	select {
	case <-wait:
		return nil
	case <-time.After(timeout):
		return errors.New("bench: warm-up message not answered")
	case <-ctx.Done():
		return ctx.Err()
	}
}
