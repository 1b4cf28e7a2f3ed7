package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/parleybin"
)

// raceMemoryFactor widens a memory bound for a binary built with -race.
const raceMemoryFactor = 4

// TestSlowClientsCannotExhaustMemory opens 300 connections to a real
// `parley serve`, each sending all but the last byte of a 1 MiB webhook
// body, and reports the server's RSS while they hang. At most
// server.max_concurrent_bodies of them are read at all — the rest are
// answered 503 at once, unread — and the read deadline cuts the admitted
// ones off, so every connection ends and the memory they pin is bounded.
//
// The read deadline has to outlast opening all 300 connections: an
// admitted body cut off while connections are still being opened frees its
// place for another, more than max_concurrent_bodies are read in all, and
// the memory measured is not that of every admitted body held. How long
// opening takes depends on the machine and its load (a race build under
// load has taken more than 3 s), so rather than always waiting out a
// deadline long enough for the worst case, the test starts with a short
// one and, when an admitted body ended before every refusal had been
// answered and the memory measured, starts again with twice the deadline
// — up to slowClientsMaxDeadline, which is judged whatever happened.
func TestSlowClientsCannotExhaustMemory(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	if testing.Short() {
		t.Skip("starts a real server and 300 connections")
	}
	bin := buildParley(t)
	for deadline := slowClientsMaxDeadline >> 3; ; deadline *= 2 {
		last := deadline >= slowClientsMaxDeadline
		if slowClientsRun(t, bin, deadline, last) || last {
			return
		}
		t.Logf("an admitted body was cut off by its %s read deadline before every connection had been answered or measured; again with %s", deadline, 2*deadline)
	}
}

// slowClientsMaxDeadline is the longest read deadline the slow-clients
// test tries; it starts at an eighth of it.
const slowClientsMaxDeadline = 32 * time.Second

// slowClientsRun runs the slow-clients test against a server whose read
// deadline is readTimeout. It reports false, asserting nothing, when an
// admitted body ended before every refusal had been answered or before
// the memory was measured (the deadline was too short for this machine)
// unless judge is set; otherwise it asserts and reports true.
func slowClientsRun(t *testing.T, bin string, readTimeout time.Duration, judge bool) bool {
	model := openaitest.New(t)
	addr := freeAddr(t)
	cfgPath := writeConfig(t, fmt.Sprintf("server:\n  read_timeout: %s\n", readTimeout))
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+model.URL(), "PARLEY_LISTEN="+addr, "PARLEY_HOME="+t.TempDir(),
		"SLACK_BOT_TOKEN=xoxb-test", "SLACK_SIGNING_SECRET=test-signing-secret", "SLACK_API_URL=http://127.0.0.1:1/api/")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	waitFor(t, "http://"+addr+"/healthz", &stderr)
	idle := rss(t, cmd.Process.Pid)

	const conns, size = 300, 1 << 20
	limit := config.DefaultMaxConcurrentBodies
	head := fmt.Sprintf("POST /slack/events HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	body := bytes.Repeat([]byte("a"), size-1)
	// early marks an answer other than 503 that came before the memory
	// was measured: an admitted body already cut off.
	type outcome struct {
		status int
		early  bool
	}
	var measured atomic.Bool
	results := make(chan outcome, conns)
	var sent sync.WaitGroup
	var opened []net.Conn
	defer func() {
		for _, c := range opened {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		opened = append(opened, c)
		sent.Add(1)
		go func() {
			defer sent.Done()
			c.SetDeadline(time.Now().Add(2 * time.Minute))
			c.Write([]byte(head)) // a refused connection may be closed under the write
			c.Write(body)
		}()
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				results <- outcome{0, !measured.Load()} // cut off without an answer
				return
			}
			resp.Body.Close()
			results <- outcome{resp.StatusCode, resp.StatusCode != http.StatusServiceUnavailable && !measured.Load()}
		}()
	}
	sent.Wait()
	held := rss(t, cmd.Process.Pid)
	measured.Store(true)
	t.Logf("RSS of parley serve: %d MiB idle, %d MiB with %d connections holding all but the last byte of a %d-byte body (read deadline %s)", idle>>20, held>>20, conns, size, readTimeout)

	// The refusals are answered at once, so with a deadline long enough
	// they all come before any admitted body is cut off. An answer other
	// than 503 before them, or before the memory was measured, means the
	// deadline ran out first: this run shows nothing either way.
	statuses := map[int]int{}
	tooShort := false
	for range conns {
		select {
		case r := <-results:
			if r.status != http.StatusServiceUnavailable && (r.early || statuses[http.StatusServiceUnavailable] < conns-limit) {
				tooShort = true
			}
			statuses[r.status]++
		case <-time.After(2 * time.Minute):
			t.Fatalf("connections still held after two minutes: %v so far", statuses)
		}
	}
	t.Logf("answers: %v (0 = closed without an answer)", statuses)
	if tooShort && !judge {
		return false
	}
	if statuses[http.StatusServiceUnavailable] < conns-limit {
		t.Errorf("%d of %d connections answered 503; want at least %d (only %d bodies may be read at once)", statuses[http.StatusServiceUnavailable], conns, conns-limit, limit)
	}
	// At most 4 MiB per admitted body (its buffer as it grows, and what
	// the server keeps of it). A binary built with -race (scripts/test
	// builds the shared one so) also keeps the race detector's shadow
	// of every byte written: a few times the memory, so its bound is
	// wider. The 503s above hold either way.
	perBody := int64(4 * size)
	if parleybin.RaceBuilt(t, bin) {
		perBody *= raceMemoryFactor
	}
	if held-idle > int64(limit)*perBody {
		t.Errorf("the slow bodies pin %d MiB; want at most %d MiB for %d admitted bodies", (held-idle)>>20, int64(limit)*perBody>>20, limit)
	}
	// The server still answers afterwards.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return true
}

// rss is the resident set size of process pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestMetricsOnSeparateListener: with PARLEY_METRICS_LISTEN, /metrics is
// served there and no longer on the public webhook port.
func TestMetricsOnSeparateListener(t *testing.T) {
	model := openaitest.New(t)
	addr, maddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": addr, "PARLEY_METRICS_LISTEN": maddr, "PARLEY_HOME": t.TempDir()})
	var stderr syncBuffer
	go func() { done <- run(ctx, []string{"serve"}, nil, io.Discard, &stderr, getenv) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, "http://"+addr+"/healthz", &stderr)
	waitFor(t, "http://"+maddr+"/metrics", &stderr)
	for url, want := range map[string]int{"http://" + addr + "/metrics": 404, "http://" + maddr + "/metrics": 200, "http://" + maddr + "/healthz": 404} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d; want %d", url, resp.StatusCode, want)
		}
		if want == 200 && !strings.Contains(string(b), "parley_redis_up") {
			t.Errorf("GET %s lacks the metrics: %.200s", url, b)
		}
	}
}
