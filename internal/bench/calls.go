package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The calls series (-calls N): N messages, each in a channel and thread of
// its own, answered first by the instant model and then by the streamed
// one (streamChunks pieces over streamOver), each on a fresh parley and
// Redis; what is printed is the platform API calls per answer, by method.
// The thread series (-thread N): messages sent into one thread, each
// after the answer to the one before, and the latency by the message's
// place in the thread, which shows the channel's post pacing
// (slack.post_burst at once, then about one a second).

// readingMethods are the calls that read the room (the thread, the
// channel, names) rather than show the answer.
var readingMethods = map[string]bool{
	"conversations.replies": true, "conversations.history": true, "users.info": true, "conversations.info": true,
}

// methodOrder is the order methods are printed in: the answer's first, as
// a reply goes; any other after them, by name.
var methodOrder = []string{
	"chat.postMessage", "assistant.threads.setStatus", "chat.startStream", "chat.appendStream", "chat.stopStream",
	"chat.update", "chat.delete", "reactions.add", "reactions.remove",
	"conversations.replies", "conversations.history", "conversations.info", "users.info",
}

// CallsResult is the platform API calls of one kind of answer.
type CallsResult struct {
	Model    string // "instant" or "streamed"
	Messages int
	// PerAnswer is the calls per message by method (the run's calls over
	// its messages).
	PerAnswer     map[string]float64
	E2E           []time.Duration // from the webhook to the answer complete (posted, or its stream stopped)
	Lost, Doubled int
	// Reading says which methods read the room (nil: Slack's).
	Reading func(method string) bool
}

// Total is all calls per answer; reading those that read the room.
func (r CallsResult) Total() (all, reading float64) {
	isReading := r.Reading
	if isReading == nil {
		isReading = func(m string) bool { return readingMethods[m] }
	}
	for m, n := range r.PerAnswer {
		all += n
		if isReading(m) {
			reading += n
		}
	}
	return all, reading
}

// perAnswer is the calls by method between two counts, over n answers;
// methods that were not called are left out.
func perAnswer(before, after map[string]int64, n int) map[string]float64 {
	out := map[string]float64{}
	if n <= 0 {
		return out
	}
	for m, c := range after {
		if d := c - before[m]; d > 0 {
			out[m] = float64(d) / float64(n)
		}
	}
	return out
}

// sortedMethods lists the methods called in any of rs, in methodOrder.
func sortedMethods(rs []CallsResult) []string {
	seen := map[string]bool{}
	for _, r := range rs {
		for m := range r.PerAnswer {
			seen[m] = true
		}
	}
	var out []string
	for _, m := range methodOrder {
		if seen[m] {
			out = append(out, m)
			delete(seen, m)
		}
	}
	var rest []string
	for m := range seen {
		rest = append(rest, m)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// printCalls prints the calls per answer of platform, one column per
// result.
func printCalls(out io.Writer, platform string, rs []CallsResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(out, "%s API calls per answer (%d messages a model, each in its own channel):\n", platform, rs[0].Messages)
	methods := sortedMethods(rs)
	width := 32
	for _, m := range methods {
		width = max(width, len(m)+2)
	}
	row := func(name string, f func(CallsResult) string) {
		fmt.Fprintf(out, "  %-*s", width, name)
		for _, r := range rs {
			fmt.Fprintf(out, " %10s", f(r))
		}
		fmt.Fprintln(out)
	}
	num := func(x float64) string { return fmt.Sprintf("%.2f", x) }
	row("", func(r CallsResult) string { return r.Model })
	for _, m := range methods {
		row(m, func(r CallsResult) string { return num(r.PerAnswer[m]) })
	}
	row("total", func(r CallsResult) string { all, _ := r.Total(); return num(all) })
	row("  showing the answer", func(r CallsResult) string { all, rd := r.Total(); return num(all - rd) })
	row("  reading the room", func(r CallsResult) string { _, rd := r.Total(); return num(rd) })
	row("e2e p50", func(r CallsResult) string { return ms(Percentile(r.E2E, 50)) })
	row("e2e p99", func(r CallsResult) string { return ms(Percentile(r.E2E, 99)) })
	row("lost / doubled", func(r CallsResult) string { return fmt.Sprintf("%d / %d", r.Lost, r.Doubled) })
}

// callsModels are the models of the calls series, in order.
var callsModels = []struct {
	name    string
	handler http.Handler
}{
	{"instant", http.HandlerFunc(echoModel)},
	{"streamed", streamedModel(streamChunks, streamOver)},
}

// RunCalls runs the calls series and prints it.
func RunCalls(ctx context.Context, o Options, out io.Writer) error {
	var rs []CallsResult
	for _, m := range callsModels {
		r, err := runCalls(ctx, o, m.name, m.handler)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	printCalls(out, "Slack", rs)
	if !o.Feishu {
		return nil
	}
	rs = nil
	for _, m := range callsModels {
		complete := func(string) bool { return true }
		if m.name == "streamed" {
			last := fmt.Sprintf("word%d", streamChunks-1)
			complete = func(text string) bool { return strings.Contains(text, last) }
		}
		r, err := runFeishuCalls(ctx, o, m.name, m.handler, complete)
		if err != nil {
			return err
		}
		r.Reading = feishuReading
		rs = append(rs, r)
	}
	printCalls(out, "Feishu Open", rs)
	return nil
}

// callsSenders is the calls series' senders: as many as parley's workers
// (gateway.workers), so that no turn waits for one.
const callsSenders = 16

// sendAll sends messages 0 to n-1 from callsSenders senders, each waiting
// for its answer (one) before its next, and returns the answers' times;
// a sender stops at its first error, which is returned.
func sendAll(n int, one func(id int) (time.Duration, error)) ([]time.Duration, error) {
	var mu sync.Mutex
	var e2e []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for k := range min(callsSenders, n) {
		wg.Go(func() {
			for id := k; id < n; id += callsSenders {
				d, err := one(id)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if d > 0 {
					e2e = append(e2e, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return e2e, firstErr
}

// runCalls sends o.Calls messages answered by model and counts the fake
// Slack's calls while they are answered.
func runCalls(ctx context.Context, o Options, name string, model http.Handler) (CallsResult, error) {
	n := o.Calls
	o.Messages = n // the warm-up's message is n
	res := CallsResult{Model: name, Messages: n}
	rg, err := startRig(ctx, o, "parley-bench-calls-", model, "")
	if err != nil {
		return res, err
	}
	defer rg.stop()
	if err := rg.settle(ctx, o, &Result{}); err != nil {
		return res, err
	}
	before := rg.fs.methodCounts()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callsSenders}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	e2e, err := sendAll(n, func(id int) (time.Duration, error) {
		return sendAndWait(ctx, client, rg, id, event(id, id%max(o.Users, 1)), o.Timeout)
	})
	res.E2E = e2e
	if err != nil {
		return res, err
	}
	// The calls that follow an answer (the typing reaction's removal) are
	// the answer's too.
	time.Sleep(time.Second)
	res.PerAnswer = perAnswer(before, rg.fs.methodCounts(), n)
	var r Result
	rg.countAnswers(o, &r)
	res.Lost, res.Doubled = r.Lost, r.Doubled
	return res, nil
}

// sendAndWait posts body (message id) and waits for its answer; it
// returns the time from the post to the answer, or 0 when none came
// within timeout.
func sendAndWait(ctx context.Context, client *http.Client, rg *rig, id int, body []byte, timeout time.Duration) (time.Duration, error) {
	wait := rg.fs.expect(id)
	t0 := time.Now()
	if _, _, err := post(ctx, client, rg.p.base+"/slack/events", body); err != nil {
		return 0, err
	}
	select {
	case a := <-wait:
		return a.at.Sub(t0), nil
	case <-time.After(timeout):
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ThreadResult is the thread series: Lat[i] are the latencies of the i-th
// message of every thread (0 for one not answered in time).
type ThreadResult struct {
	Threads, PerThread int
	Lat                [][]time.Duration
}

// IndexStat is the latency of one place in a thread over the threads.
type IndexStat struct {
	P50, P99 time.Duration
	Answered int
}

// indexStats are the latency figures by place in the thread; an
// unanswered message (0) counts in no percentile.
func indexStats(lat [][]time.Duration) []IndexStat {
	out := make([]IndexStat, len(lat))
	for i, ds := range lat {
		var got []time.Duration
		for _, d := range ds {
			if d > 0 {
				got = append(got, d)
			}
		}
		out[i] = IndexStat{P50: Percentile(got, 50), P99: Percentile(got, 99), Answered: len(got)}
	}
	return out
}

// printThread prints the thread series, one line per place in the thread.
func printThread(out io.Writer, r ThreadResult) {
	fmt.Fprintf(out, "one-thread series: %d threads at once (each in its own channel), %d messages each, every one sent once the one before is answered (instant model):\n",
		r.Threads, r.PerThread)
	fmt.Fprintf(out, "  %-8s %12s %12s %9s\n", "message", "p50", "p99", "answered")
	for i, s := range indexStats(r.Lat) {
		fmt.Fprintf(out, "  %-8d %12s %12s %4d/%-4d\n", i+1, ms(s.P50), ms(s.P99), s.Answered, r.Threads)
	}
}

// threadEvent is message id, the i-th of thread k, from one of three
// people writing in it.
func threadEvent(id, k, i int) []byte {
	return eventIn(id, i%3, chanOf(k), threadTS(k))
}

// RunThread runs the thread series and prints it.
func RunThread(ctx context.Context, o Options, out io.Writer) error {
	r, err := runThread(ctx, o)
	if err != nil {
		return err
	}
	printThread(out, r)
	return nil
}

// runThread sends o.Thread messages into each of o.Threads threads, each
// thread's one after another, the threads at once.
func runThread(ctx context.Context, o Options) (ThreadResult, error) {
	t, n := max(o.Threads, 1), o.Thread
	res := ThreadResult{Threads: t, PerThread: n, Lat: make([][]time.Duration, n)}
	for i := range res.Lat {
		res.Lat[i] = make([]time.Duration, t)
	}
	o.Messages = t * n // the warm-up's message, in a channel of no thread's
	rg, err := startRig(ctx, o, "parley-bench-thread-", http.HandlerFunc(echoModel), "")
	if err != nil {
		return res, err
	}
	defer rg.stop()
	if err := rg.settle(ctx, o, &Result{}); err != nil {
		return res, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: t}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for k := range t {
		wg.Go(func() {
			for i := range n {
				id := k*n + i
				d, err := sendAndWait(ctx, client, rg, id, threadEvent(id, k, i), o.Timeout)
				mu.Lock()
				res.Lat[i][k] = d
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return res, firstErr
}
