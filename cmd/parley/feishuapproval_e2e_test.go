package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/internal/redistest"
)

// feishuCluster is `parley serve` processes on one Redis, one fake model
// and one fake Feishu, with write tools waiting for approval on Feishu
// (admin ou_admin) and a notes skill.
type feishuCluster struct {
	redis *redistest.Redis
	model *openaitest.Server
	api   *feishutest.Server
	home  string
	cfg   string
}

func newFeishuCluster(t *testing.T) *feishuCluster {
	t.Helper()
	r := redistest.New(t)
	c := &feishuCluster{redis: r, model: openaitest.New(t, openaitest.WithResponder(rememberModel)), api: feishutest.New(t), home: t.TempDir()}
	skillFile(t, filepath.Join(c.home, "skills"), "notes", "")
	c.cfg = writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
sessions:
  lock_ttl: 2s
gateway:
  shutdown_timeout: 20s
policies:
  platforms:
    feishu:
      admins: [ou_admin]
      tools:
        approve_writes: true
`, r.Prefix))
	return c
}

// start runs one more replica.
func (c *feishuCluster) start(t *testing.T) *replica {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(parleyBinary(t), "serve", "--config", c.cfg)
	cmd.Env = append(os.Environ(),
		"REDIS_URL="+c.redis.URL, "OPENAI_BASE_URL="+c.model.URL(), "OPENAI_API_KEY=sk-test",
		"PARLEY_LISTEN="+addr, "PARLEY_HOME="+c.home, "PARLEY_WORKSPACE="+t.TempDir(),
		"FEISHU_APP_ID=cli_e2e_approval", "FEISHU_APP_SECRET=app-secret",
		"FEISHU_VERIFICATION_TOKEN="+e2eFeishuToken, "FEISHU_ENCRYPT_KEY="+e2eFeishuKey,
		"FEISHU_BASE_URL="+c.api.URL, "FEISHU_MODE=webhook")
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

// saved is the notes skill's reference file as it stands.
func (c *feishuCluster) saved() string {
	b, _ := os.ReadFile(filepath.Join(c.home, "skills", "notes", "references", "notes.md"))
	return string(b)
}

// feishuPost sends an encrypted, signed callback to rp and returns the
// status and body.
func feishuPost(t *testing.T, rp *replica, event []byte) (int, string) {
	t.Helper()
	req := feishutest.Request(rp.base+"/feishu/events", feishutest.Encrypted(event, e2eFeishuKey), e2eFeishuKey, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// feishuClick delivers a click to rp and reads Feishu's answer to it.
func feishuClick(t *testing.T, rp *replica, c feishutest.CardAction) feishutest.ClickAnswer {
	t.Helper()
	status, body := feishuPost(t, rp, feishutest.Click(c))
	var a feishutest.ClickAnswer
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
		t.Errorf("click answered %d %q", status, body)
	}
	return a
}

// card waits for the approval card replying to message and returns it
// with the click on its button for decision by user.
func (c *feishuCluster) card(t *testing.T, message, user, decision string) (feishutest.Sent, feishutest.CardAction) {
	t.Helper()
	var card feishutest.Sent
	pollUntil(t, "the approval card for "+message, &syncBuffer{}, func() bool {
		for _, s := range c.api.Sent() {
			if s.ReplyTo == message && len(feishutest.Buttons(s.Content)) == 2 {
				card = s
				return true
			}
		}
		return false
	})
	for _, b := range feishutest.Buttons(card.Content) {
		if b.Value["decision"] == decision {
			return card, feishutest.CardAction{Token: e2eFeishuToken, Operator: user, MessageID: card.MessageID, ChatID: "oc_team", Value: b.Value}
		}
	}
	t.Fatalf("no %s button on %s", decision, card.Content)
	return card, feishutest.CardAction{}
}

// answeredWith waits for a message replying to message with text.
func (c *feishuCluster) answeredWith(t *testing.T, message, text string) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("%q replying to %s", text, message), &syncBuffer{}, func() bool {
		for _, s := range c.api.Sent() {
			if s.ReplyTo == message && s.Text == text {
				return true
			}
		}
		return false
	})
}

// TestFeishuApprovalCardsAcrossReplicas: with tools.approve_writes on
// Feishu, the model's save_skill_reference call shows an Approve/Deny card.
// The replica that paused the turn is killed and Approve on the other
// resumes it; a non-approver's click changes nothing; one click delivered
// to two replicas at once writes the reference once (one answer approves,
// the other says it already was, both redraw the card without buttons);
// Deny writes nothing and the model says so.
func TestFeishuApprovalCardsAcrossReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newFeishuCluster(t)

	// The replica holding the turn dies while the card is pending.
	a := c.start(t)
	if status, body := feishuPost(t, a, groupEvent("om_kill", "ou_alice", "remember kill-proof", true)); status != http.StatusOK {
		t.Fatalf("mention: %d %s", status, body)
	}
	_, click := c.card(t, "om_kill", "ou_alice", "approve")
	b := c.start(t)
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	if ans := feishuClick(t, b, click); !strings.Contains(ans.CardText(), "Approved by") {
		t.Errorf("the card after the click: %q (toast %q)", ans.CardText(), ans.ToastText())
	}
	c.answeredWith(t, "om_kill", "saved it")
	if got := strings.Count(c.saved(), "kill-proof"); got != 1 {
		t.Fatalf("the reference holds kill-proof %d times: %q", got, c.saved())
	}

	// Two replicas from here on.
	a = c.start(t)
	if status, _ := feishuPost(t, a, groupEvent("om_two", "ou_alice", "remember two-replicas", true)); status != http.StatusOK {
		t.Fatal("mention refused")
	}
	card, approve := c.card(t, "om_two", "ou_admin", "approve")
	stranger := approve
	stranger.Operator = "ou_mallory"
	if ans := feishuClick(t, a, stranger); ans.Card != nil || ans.ToastText() != "You can't approve this." {
		t.Errorf("a non-approver's click: %+v", ans)
	}
	if strings.Contains(c.saved(), "two-replicas") {
		t.Fatal("a refused click wrote the reference")
	}
	approve.EventID = "ev_click_both"
	answers := make([]feishutest.ClickAnswer, 2)
	var wg sync.WaitGroup
	for i, rp := range []*replica{a, b} {
		wg.Go(func() { answers[i] = feishuClick(t, rp, approve) })
	}
	wg.Wait()
	toasts := answers[0].ToastText() + " | " + answers[1].ToastText()
	if strings.Count(toasts, "Approved —") != 1 || strings.Count(toasts, "Already approved by ou_admin") != 1 {
		t.Errorf("toasts %q: want one approval and one 'already approved'", toasts)
	}
	for _, ans := range answers {
		if !strings.Contains(ans.CardText(), "Approved by <at id=ou_admin></at>") || ans.Card == nil || strings.Contains(string(ans.Card.Data), `"button"`) {
			t.Errorf("a redrawn card: %q", ans.CardText())
		}
	}
	c.answeredWith(t, "om_two", "saved it")
	if got := strings.Count(c.saved(), "two-replicas"); got != 1 {
		t.Fatalf("the reference holds two-replicas %d times: %q", got, c.saved())
	}

	// Deny.
	if status, _ := feishuPost(t, b, groupEvent("om_deny", "ou_alice", "remember never", true)); status != http.StatusOK {
		t.Fatal("mention refused")
	}
	_, deny := c.card(t, "om_deny", "ou_admin", "deny")
	if ans := feishuClick(t, a, deny); !strings.Contains(ans.CardText(), "Denied by") {
		t.Errorf("the denied card: %q", ans.CardText())
	}
	c.answeredWith(t, "om_deny", "not saved: denied by ou_admin")
	if strings.Contains(c.saved(), "never") {
		t.Errorf("a denied call wrote %q", c.saved())
	}
	for _, s := range c.api.Sent() {
		if s.ReplyTo == card.MessageID {
			t.Errorf("a click was answered with a message: %+v", s)
		}
	}
}
