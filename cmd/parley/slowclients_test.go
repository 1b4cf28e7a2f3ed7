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
func TestSlowClientsCannotExhaustMemory(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	if testing.Short() {
		t.Skip("starts a real server and 300 connections")
	}
	bin := buildParley(t)
	model := openaitest.New(t)
	addr := freeAddr(t)
	// The read deadline outlasts opening all 300 connections, however slow
	// the machine or the build (a race build under load took longer than
	// 3 s): an admitted body cut off by its deadline while connections are
	// still being opened frees its place for one of them, and more than
	// max_concurrent_bodies would be read in all.
	cfgPath := writeConfig(t, "server:\n  read_timeout: 30s\n")
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+model.URL(), "PARLEY_LISTEN="+addr, "PARLEY_HOME="+t.TempDir(),
		"SLACK_BOT_TOKEN=xoxb-test", "SLACK_SIGNING_SECRET=test-signing-secret", "SLACK_API_URL=http://127.0.0.1:1/api/")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	waitFor(t, "http://"+addr+"/healthz", &stderr)
	idle := rss(t, cmd.Process.Pid)

	const conns, size = 300, 1 << 20
	head := fmt.Sprintf("POST /slack/events HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	body := bytes.Repeat([]byte("a"), size-1)
	type outcome struct{ status int }
	results := make(chan outcome, conns)
	var sent sync.WaitGroup
	var opened []net.Conn
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
				results <- outcome{0} // cut off without an answer
				return
			}
			resp.Body.Close()
			results <- outcome{resp.StatusCode}
		}()
	}
	t.Cleanup(func() {
		for _, c := range opened {
			c.Close()
		}
	})
	sent.Wait()
	held := rss(t, cmd.Process.Pid)
	t.Logf("RSS of parley serve: %d MiB idle, %d MiB with %d connections holding all but the last byte of a %d-byte body", idle>>20, held>>20, conns, size)

	statuses := map[int]int{}
	for range conns {
		select {
		case r := <-results:
			statuses[r.status]++
		case <-time.After(2 * time.Minute):
			t.Fatalf("connections still held after two minutes: %v so far", statuses)
		}
	}
	t.Logf("answers: %v (0 = closed without an answer)", statuses)
	limit := config.DefaultMaxConcurrentBodies
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
