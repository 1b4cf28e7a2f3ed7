// Command parley-bench measures one `parley serve` driven the way Slack
// drives it. scripts/bench runs it; `parley-bench -h` explains every figure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parleyhq/parley/internal/bench"
)

const help = `Usage: scripts/bench [flags]

Starts its own redis-server (append-only with appendfsync everysec, as
deploy/compose.yaml runs Redis, on a free port; -redis-fsync always makes it
flush the disk before it answers any write), an instant fake model (it
echoes) and a fake Slack Web API on loopback, runs ` + "`parley serve`" + `
against them, and posts signed Slack Events API requests: app mentions from
32 users, each of c senders waiting for its answer before its next message.
Every message starts a thread in a channel of its own: parley paces its
posts to one channel to about one a second, as Slack allows, so a faster
stream must be spread over channels. Every run starts from a fresh Redis and
a fresh parley.

Figures, per run and as the median (with the range) of the runs:
  e2e p50/p99      from sending the webhook to the fake Slack receiving the answer
  ack p50/p99      the webhook's response time (POST /slack/events)
  ack in parley    parley's own part of it, from its parley_webhook_duration_seconds
                   (handler called to returned; buckets 0.5 ms doubling, so p99 is
                   a bound): p99, the share within 2 ms and the mean. The rest of
                   an ack is the bench's sending and reading and the network stack
  CPU ms/msg       the parley process's user+system time (/proc/PID/stat) over
                   the run, divided by the messages
  Redis round trips  Redis's INFO total_writes_processed over the run, per message;
                   "of which webhook W (ack probe), turn T": the webhook's share
                   measured by the ack probe, and the rest, the turn's
  Redis commands   Redis's INFO total_commands_processed over the run, per message:
                   every command, each of a pipeline's counted (the bench's own
                   INFO reads are left out of both Redis figures)
  new connections  connections the fake model and the fake Slack accepted during
                   the run (start-up excluded)
  Slack API calls  Web API calls the fake Slack answered over the run, per message:
                   the answer's post and reactions, and with -context on (the
                   default, as LEVEL.context.thread) the thread read back
                   (conversations.replies; the fake's thread has a parent and two
                   replies by two people) and the first lookups of their names
                   (users.info, cached in Redis); -context off compares without
  idle RSS         VmRSS of parley (/proc/PID/status) one second after it is ready,
                   before any message, and its parts RssAnon (anonymous: heap,
                   stacks, runtime) and RssFile (file-backed: the binary's pages)
  throughput       messages / wall time of the run
  lost / doubled / misrouted
                   messages with no answer, with more than one, or answered in
                   another thread (or answers naming no message)
  other processes  the machine's busy share (/proc/stat) less parley's, Redis's
                   and the bench's own CPU time: how busy the rest of the machine was

The ack probe runs first, on its own parley and Redis: the fake model holds
every worker's turn (16, the default gateway.workers) while N webhooks into
other channels are sent one after another. Their response times are the
webhook path's own, with no turn competing for the process (ack p50/p99 of
the probe), and the change in total_writes_processed over them is the
webhook's Redis round trips. Then the model answers and every message must
be answered once.

With -idle N, no messages: N fresh servers in turn, each measured one second
after it is ready: VmRSS (and its RssAnon and RssFile), the binary's resident pages by ELF section (.text,
.rodata, .gopclntab, .data, .bss; counted with /proc/PID/pagemap), the 64 KiB
windows they lie in, the .text windows shared out by package (by bytes of code
in each window: whose code start-up touched), anonymous memory (Go heap,
stacks, runtime) and the Go runtime's own figures.

With -profile DIR, parley is built with -tags parleyprofile and each run
writes DIR/cN-runI/cpu.pprof (the run's CPU profile) and allocs.pprof
(allocations since start-up): go tool pprof -top DIR/c32-run1/cpu.pprof.

With -rate N (messages a second, comma-separated), each series sends its
messages on time, N a second, whatever the pace of the answers, as a
platform does, instead of c senders that each wait for their answer (a
closed loop, which always runs the machine as fast as it goes, so its
latencies are those of a saturated machine). It gives the latencies at a
given load; the series are printed as rate=N/s.

With -redis-outage D: one run at c=32 (default 6,000 messages), with appendfsync
always unless -redis-fsync says otherwise; Redis is killed
with SIGKILL when half the messages have been sent and restarted D later on the
same port and data. Refused webhooks (503 or no answer) are retried as Slack
retries them (X-Slack-Retry-Num). It also prints the messages accepted and
unanswered at the kill and, for those, the longest time from Redis's restart to
their answer.

With -calls N, only the platform API calls of an answer: N messages (each
in its own channel and thread, from 16 senders) answered by the instant
model, then N by a streamed model (30 chunks spread over 4.5 s, as
server-sent events to parley's "stream": true), each on a fresh parley and
Redis; the fake Slack answers the streaming methods (chat.startStream,
chat.appendStream, chat.stopStream, chat.update, chat.delete,
assistant.threads.setStatus) as Slack does. Printed: the calls per answer
by method, their total, split into showing the answer and reading the room,
and e2e p50/p99 (to the answer posted, or its stream stopped). Then the
same for Feishu (unless -feishu=false): parley serves a Feishu app in
webhook mode against a fake Open API (channels/feishu/feishutest) behind a
proxy that counts every call by method and path; each message is an
encrypted, signed im.message.receive_v1 mentioning the bot in a group chat
of its own, and its answer is complete when its text shows whole and its
card no longer streams (feishu.stream_every paces the card's updates).

With -thread N, only the one-thread series: -threads T threads at once,
each in its own channel, and in each N messages from three people, each
sent once the one before is answered (instant model). Printed: p50/p99 of
each message's e2e by its place in the thread, over the T threads: the
first slack.post_burst (default 3) come at the model's pace, the later ones
at the channel's post pace (about one a second).

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, idle, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlags):
		return 2 // the flag package said why
	case err != nil:
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.Parley == "" {
		dir, err := os.MkdirTemp("", "parley-bench-bin-")
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if o.Parley, err = buildParley(ctx, dir, o.ProfileDir != "", stderr); err != nil {
			fmt.Fprintf(stderr, "bench: go build: %v", err) // the error ends with go build's output
			return 1
		}
	}
	if idle > 0 {
		if err := bench.Idle(ctx, o, idle, stdout); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	if err := bench.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// errFlags is a command line the flag package refused (and explained).
var errFlags = errors.New("bench: bad flags")

// parseFlags reads the command line into the bench's options and -idle,
// with the defaults that depend on other flags.
func parseFlags(args []string, stderr io.Writer) (bench.Options, int, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parley := fs.String("parley", "", "parley binary to measure (default: build ./cmd/parley)")
	conc := fs.String("c", "1,32", "concurrent senders, comma-separated: one series of runs each")
	rates := fs.String("rate", "", "messages a second, comma-separated: one series of runs each, sent on time whatever the answers' pace (default none; with -rate, -c only if given)")
	messages := fs.Int("messages", 0, "messages a run (default 2000; 6000 with -redis-outage)")
	runs := fs.Int("runs", 5, "runs per concurrency; the medians are over these")
	fsync := fs.String("redis-fsync", "", "the bench Redis's appendfsync, always or everysec (default everysec, as deploy/compose.yaml runs Redis; always with -redis-outage)")
	outage := fs.Duration("redis-outage", 0, "kill -9 Redis halfway through one run and restart it after this long")
	probe := fs.Int("ack-probe", 500, "webhooks the ack probe sends while the model holds every worker (0: no probe)")
	profile := fs.String("profile", "", "write CPU and allocation profiles of parley for each run under this directory")
	idle := fs.Int("idle", 0, "only measure what idle RSS is made of, on this many fresh servers in turn (no messages)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long a sender waits for an answer before counting it lost")
	calls := fs.Int("calls", 0, "only count the Slack API calls per answer: this many messages answered by the instant model, then as many by the streamed one (30 chunks over 4.5 s)")
	feishu := fs.Bool("feishu", true, "with -calls: count Feishu's Open API calls per answer too (a fake Feishu app in webhook mode)")
	thread := fs.Int("thread", 0, "only the one-thread series: this many messages in one thread, each sent once the one before is answered; latency by place in the thread")
	threads := fs.Int("threads", 5, "with -thread: threads at once, each in its own channel; the percentiles are over these")
	room := fs.String("context", "on", "read the thread back before answering (LEVEL.context.thread), on or off: compare the Slack API calls per message")
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return bench.Options{}, 0, err
		}
		return bench.Options{}, 0, fmt.Errorf("%w: %w", errFlags, err)
	}
	o := bench.Options{Parley: *parley, Messages: *messages, Runs: *runs, RedisOutage: *outage, Timeout: *timeout,
		AckProbe: *probe, ProfileDir: *profile, RedisFsync: *fsync, NoContext: *room == "off",
		Calls: *calls, Feishu: *feishu, Thread: *thread, Threads: *threads}
	if o.Messages <= 0 {
		o.Messages = 2000
		if o.RedisOutage > 0 {
			o.Messages = 6000
		}
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	var ok bool
	if *rates != "" {
		if o.Rates, ok = positives(*rates); !ok {
			return o, 0, fmt.Errorf("-rate %q: want positive numbers", *rates)
		}
		if o.RedisOutage > 0 {
			return o, 0, errors.New("-rate and -redis-outage do not go together: the outage run is at c=32")
		}
	}
	if *rates == "" || explicit["c"] {
		if o.Concurrency, ok = positives(*conc); !ok {
			return o, 0, fmt.Errorf("-c %q: want positive numbers", *conc)
		}
	}
	if *fsync != "" && *fsync != "always" && *fsync != "everysec" {
		return o, 0, fmt.Errorf("-redis-fsync %q: want always or everysec", *fsync)
	}
	if *room != "on" && *room != "off" {
		return o, 0, fmt.Errorf("-context %q: want on or off", *room)
	}
	if *calls < 0 || *thread < 0 || *threads < 1 {
		return o, 0, errors.New("-calls and -thread must not be negative, -threads must be at least 1")
	}
	if (*calls > 0 || *thread > 0) && (o.RedisOutage > 0 || *rates != "") {
		return o, 0, errors.New("-calls and -thread do not go with -redis-outage or -rate")
	}
	if *probe < 0 {
		return o, 0, errors.New("-ack-probe must not be negative")
	}
	if o.Runs < 1 {
		return o, 0, errors.New("-runs must be at least 1")
	}
	return o, *idle, nil
}

// buildParley builds ./cmd/parley into dir (with profiling built in when
// profile is set) and returns the binary's path.
func buildParley(ctx context.Context, dir string, profile bool, stderr io.Writer) (string, error) {
	bin := filepath.Join(dir, "parley")
	fmt.Fprintln(stderr, "bench: building ./cmd/parley")
	build := []string{"build", "-o", bin}
	if profile {
		build = append(build, "-tags", "parleyprofile")
	}
	if b, err := exec.CommandContext(ctx, "go", append(build, "./cmd/parley")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, b)
	}
	return bin, nil
}

// positives parses a comma-separated list of positive integers.
func positives(list string) ([]int, bool) {
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, false
		}
		ns = append(ns, n)
	}
	return ns, true
}
