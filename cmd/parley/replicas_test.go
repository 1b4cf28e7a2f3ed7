package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/parleybin"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// These tests run real `parley serve` processes — the binary, not the
// package — on one real Redis, in front of the fake Slack and the fake
// model: what operators run as replicas behind a load balancer.

// parleyBinary is the binary, built once for the whole test run.
func parleyBinary(t *testing.T) string {
	t.Helper()
	return parleybin.Path(t)
}

func TestMain(m *testing.M) {
	// Started by a test as a stdio MCP server: serve, and exit.
	mcptest.ServeStdio()
	code := m.Run()
	parleybin.Remove()
	os.Exit(code)
}

// replica is one parley serve process.
type replica struct {
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	exited chan struct{} // closed once the process has been waited for
	err    error         // its exit status, valid after exited
}

type cluster struct {
	redis *redistest.Redis
	model *openaitest.Server
	slack *slacktest.Server
	home  string
	cfg   string
}

// slowResponder answers "echo: …" like the default, but takes its time for
// the first message containing "slow" so that a test can act while that
// turn runs. Asked again (by the replica that took over a killed one's
// turn), it answers at once: the second wait would show nothing.
func slowResponder() openaitest.Responder {
	var slowed atomic.Bool
	return func(req openai.ChatCompletionRequest) openaitest.Step {
		step := openaitest.Echo(req)
		if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Content, "slow") && slowed.CompareAndSwap(false, true) {
			step = step.WithDelay(3 * time.Second)
		}
		return step
	}
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	r := redistest.New(t)
	c := &cluster{redis: r, model: openaitest.New(t, openaitest.WithResponder(slowResponder())), slack: slacktest.New(t), home: t.TempDir()}
	// Turns of one conversation wait for their reply's post, which keeps
	// Slack's pace of a post a second per channel: a test answering
	// twenty messages in one thread would wait twenty seconds for it.
	c.cfg = writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
slack:
  post_every: 20ms
sessions:
  lock_ttl: 2s
gateway:
  shutdown_timeout: 20s
policies:
  default:
    admins: [slack:UADMIN]
`, r.Prefix))
	return c
}

// start runs a replica; env adds to (and overrides) its environment.
func (c *cluster) start(t *testing.T, env ...string) *replica {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(parleyBinary(t), "serve", "--config", c.cfg)
	cmd.Env = append(os.Environ(),
		"REDIS_URL="+c.redis.URL, "OPENAI_BASE_URL="+c.model.URL(), "OPENAI_API_KEY=sk-test",
		"PARLEY_LISTEN="+addr, "PARLEY_HOME="+c.home, "PARLEY_WORKSPACE="+t.TempDir(),
		"SLACK_BOT_TOKEN="+slacktest.BotToken, "SLACK_SIGNING_SECRET="+slacktest.Secret, "SLACK_API_URL="+c.slack.APIURL())
	cmd.Env = append(cmd.Env, env...)
	rp := &replica{cmd: cmd, base: "http://" + addr, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = rp.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { rp.err = cmd.Wait(); close(rp.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-rp.exited
		if t.Failed() {
			t.Logf("replica %s stderr:\n%s", addr, rp.stderr.String())
		}
	})
	waitFor(t, rp.base+"/readyz", rp.stderr)
	return rp
}

// mention posts a signed app_mention in thread (root ts) of channel C1.
func (rp *replica) mention(t *testing.T, id, user, ts, thread, text string) {
	t.Helper()
	body, _ := json.Marshal(slacktest.Event(id, slacktest.Mention("C1", user, ts, thread, text)))
	req := slacktest.Signed(t, rp.base+"/slack/events", slacktest.Secret, time.Now(), body)
	if status, resp := slacktest.Do(t, req); status != http.StatusOK {
		t.Fatalf("POST /slack/events: %d %s", status, resp)
	}
}

func postsWith(c *cluster, text string) int {
	n := 0
	for _, p := range c.slack.Posts() {
		if strings.Contains(p.Text, text) {
			n++
		}
	}
	return n
}

func (c *cluster) waitPost(t *testing.T, text string) {
	t.Helper()
	slacktest.WaitFor(t, fmt.Sprintf("a post with %q", text), 60*time.Second, func() bool { return postsWith(c, text) > 0 })
}

func TestReplicasAnswerOneEventOnce(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	a, b := c.start(t), c.start(t)
	a.mention(t, "EvSame", "U1", "1700000100.000001", "", "only once please")
	b.mention(t, "EvSame", "U1", "1700000100.000001", "", "only once please")
	c.waitPost(t, "echo: only once please")
	// A marker in the same thread, after the duplicate: once it is answered
	// the duplicate would have been too.
	b.mention(t, "EvMarker", "U1", "1700000100.000002", "1700000100.000001", "marker")
	c.waitPost(t, "echo: marker")
	if n := postsWith(c, "only once please"); n != 1 {
		t.Fatalf("%d replies to one event delivered to two replicas", n)
	}
}

func TestReplicasKeepOneThreadInArrivalOrder(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	rs := []*replica{c.start(t), c.start(t)}
	const root = "1700000200.000000"
	for i := 0; i < 20; i++ {
		ts := fmt.Sprintf("1700000200.%06d", i+1)
		rs[i%2].mention(t, fmt.Sprintf("EvOrder%d", i), "U1", ts, root, fmt.Sprintf("m%02d", i))
	}
	slacktest.WaitFor(t, "20 replies", 90*time.Second, func() bool { return len(c.slack.Posts()) >= 20 })
	store := sessions.NewRedis(c.redis.Client, sessions.Options{Prefix: c.redis.Prefix})
	h, err := store.History(context.Background(), "slack:"+slacktest.TeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for i, m := range h {
		if m.Role == "user" {
			users = append(users, m.Content)
			if i+1 >= len(h) || h[i+1].Content != "echo: "+m.Content {
				t.Fatalf("turn of %q is not followed by its answer", m.Content)
			}
		}
	}
	var want []string
	for i := 0; i < 20; i++ {
		want = append(want, fmt.Sprintf("m%02d", i))
	}
	if strings.Join(users, ",") != strings.Join(want, ",") {
		t.Fatalf("history order\n  %v\nwant\n  %v", users, want)
	}
}

func TestKilledReplicaLeavesNoStuckLock(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	a, b := c.start(t), c.start(t)
	const root = "1700000300.000001"
	a.mention(t, "EvSlow", "U1", root, "", "slow question")
	slacktest.WaitFor(t, "the model to get the slow question", 30*time.Second, func() bool { return c.model.RequestCount() > 0 })
	a.cmd.Process.Signal(syscall.SIGKILL) // mid-turn: the lock stays behind until it expires
	<-a.exited
	b.mention(t, "EvNext", "U1", "1700000300.000002", root, "next question")
	c.waitPost(t, "echo: next question")
	// The killed replica's message was not lost either: it was at the head
	// of the conversation's queue, so the next holder answered it first.
	if postsWith(c, "echo: slow question") != 1 {
		t.Fatalf("the message of the killed turn was answered %d times", postsWith(c, "echo: slow question"))
	}
}

func TestSkillReloadOnOneReplicaReloadsTheOther(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	a, b := c.start(t), c.start(t)
	dir := filepath.Join(c.home, "skills", "runbook")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: runbook\ndescription: The on-call runbook.\n---\nPage the owner.\n"), 0o644)
	a.mention(t, "EvReload", "UADMIN", "1700000400.000001", "", "/skill reload")
	c.waitPost(t, "Reloaded: 3 skills") // the two builtins and runbook
	slacktest.WaitFor(t, "replica b to reload", 30*time.Second, func() bool {
		b.mention(t, fmt.Sprintf("EvList%d", time.Now().UnixNano()), "UADMIN", fmt.Sprintf("1700000401.%06d", time.Now().UnixNano()%1e6), "", "/skill list")
		time.Sleep(300 * time.Millisecond)
		for _, p := range c.slack.Posts() {
			if strings.Contains(p.Text, "runbook") && strings.Contains(p.Text, "skills:") {
				return true
			}
		}
		return false
	})
}

func TestSIGTERMDrainsInFlightTurns(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	a := c.start(t)
	a.mention(t, "EvDrain", "U1", "1700000500.000001", "", "slow but sure")
	slacktest.WaitFor(t, "the model to get the question", 30*time.Second, func() bool { return c.model.RequestCount() > 0 })
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		if a.err != nil {
			t.Fatalf("parley serve exited with %v after SIGTERM:\n%s", a.err, a.stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("parley serve did not exit after SIGTERM")
	}
	if postsWith(c, "echo: slow but sure") != 1 {
		t.Fatalf("the in-flight turn was not answered before exit; posts: %+v", c.slack.Posts())
	}
	if !bytes.Contains([]byte(a.stderr.String()), []byte("draining")) {
		t.Errorf("no drain in the log:\n%s", a.stderr.String())
	}
}
