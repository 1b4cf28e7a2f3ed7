package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

// rememberModel saves "remember X" as a reference of the notes skill and,
// once it has the tool's result, says what came of it.
func rememberModel(req openai.ChatCompletionRequest) openaitest.Step {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool" && strings.Contains(last.Content, "Saved:"):
		return openaitest.Text("saved it")
	case last.Role == "tool":
		for _, s := range []string{"denied by", "approval expired"} {
			if i := strings.Index(last.Content, s); i >= 0 {
				rest := last.Content[i:]
				if end := strings.IndexAny(rest, ".:(\n"); end >= 0 {
					rest = rest[:end]
				}
				return openaitest.Text("not saved: " + strings.TrimSpace(rest))
			}
		}
		return openaitest.Text("not saved: " + last.Content)
	case strings.HasPrefix(last.Content, "remember "):
		args, _ := json.Marshal(map[string]string{"name": "notes", "file": "references/notes.md", "content": strings.TrimPrefix(last.Content, "remember ") + "\n"})
		return openaitest.Tools(openaitest.Call("save_skill_reference", string(args)))
	}
	return openaitest.Echo(req)
}

// approvalCluster is two or more `parley serve` processes on one Redis
// with write tools waiting for approval on Slack (admin UADMIN; in
// channel CQUICK approvals expire after 3 s), and a notes skill.
func approvalCluster(t *testing.T) *cluster {
	t.Helper()
	r := redistest.New(t)
	c := &cluster{redis: r, model: openaitest.New(t, openaitest.WithResponder(rememberModel)), slack: slacktest.New(t), home: t.TempDir()}
	skillFile(t, filepath.Join(c.home, "skills"), "notes", "")
	// Slack's pace of a post a second per channel would make each prompt,
	// update and answer wait for the one before (see newCluster).
	c.cfg = writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
slack:
  post_every: 20ms
sessions:
  lock_ttl: 2s
gateway:
  shutdown_timeout: 20s
policies:
  platforms:
    slack:
      admins: [UADMIN]
      tools:
        approve_writes: true
      workspaces:
        %s:
          chats:
            CQUICK:
              approval_timeout: 3s
`, r.Prefix, slacktest.TeamID))
	return c
}

// saved is the notes skill's reference file as it stands.
func (c *cluster) saved() string {
	b, _ := os.ReadFile(filepath.Join(c.home, "skills", "notes", "references", "notes.md"))
	return string(b)
}

// mentionIn posts a signed app_mention in channel.
func (rp *replica) mentionIn(t *testing.T, channel, id, user, ts, text string) {
	t.Helper()
	body, _ := json.Marshal(slacktest.Event(id, slacktest.Mention(channel, user, ts, "", text)))
	req := slacktest.Signed(t, rp.base+"/slack/events", slacktest.Secret, time.Now(), body)
	if status, resp := slacktest.Do(t, req); status != http.StatusOK {
		t.Fatalf("POST /slack/events: %d %s", status, resp)
	}
}

// click posts an interactivity request signed with secret at at, and
// returns the status.
func (rp *replica) click(t *testing.T, payload map[string]any, secret string, at time.Time) int {
	t.Helper()
	req := slacktest.Signed(t, rp.base+"/slack/interactions", secret, at, slacktest.InteractionForm(payload))
	status, _ := slacktest.Do(t, req)
	return status
}

// prompt waits for the approval prompt (a post with blocks) in thread and
// returns it with the approval id its buttons carry.
func (c *cluster) prompt(t *testing.T, channel, thread string) (slacktest.Post, string) {
	t.Helper()
	var found slacktest.Post
	slacktest.WaitFor(t, "an approval prompt in "+thread, 60*time.Second, func() bool {
		for _, p := range c.slack.Posts() {
			if p.Channel == channel && p.ThreadTS == thread && p.Blocks != "" {
				found = p
				return true
			}
		}
		return false
	})
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(found.Blocks), &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID == "parley_approve" {
				return found, e.Value
			}
		}
	}
	t.Fatalf("the prompt has no Approve button: %s", found.Blocks)
	return found, ""
}

// updatedWith waits for an update of the prompt p whose blocks hold want.
func (c *cluster) updatedWith(t *testing.T, p slacktest.Post, want string) {
	t.Helper()
	slacktest.WaitFor(t, fmt.Sprintf("the prompt updated with %q", want), 60*time.Second, func() bool {
		for _, u := range c.slack.Updates() {
			if u.TS == p.TS && u.Channel == p.Channel && strings.Contains(u.Blocks, want) && !strings.Contains(u.Blocks, "parley_approve") {
				return true
			}
		}
		return false
	})
}

// updates counts the updates of the prompt p.
func (c *cluster) updates(p slacktest.Post) int {
	n := 0
	for _, u := range c.slack.Updates() {
		if u.TS == p.TS {
			n++
		}
	}
	return n
}

// ephemeral waits for a post to the response_url id with text.
func (c *cluster) ephemeral(t *testing.T, id, text string) {
	t.Helper()
	slacktest.WaitFor(t, fmt.Sprintf("%q to %s alone", text, id), 60*time.Second, func() bool {
		for _, p := range c.slack.Posts() {
			if p.ResponseURL == "/response/"+id && p.ResponseType == "ephemeral" && strings.Contains(p.Text, text) {
				return true
			}
		}
		return false
	})
}

// answered counts the posts in thread with text.
func (c *cluster) answered(channel, thread, text string) int {
	n := 0
	for _, p := range c.slack.Posts() {
		if p.Channel == channel && p.ThreadTS == thread && p.Text == text {
			n++
		}
	}
	return n
}

// TestSlackApprovalButtonsAcrossReplicas: with tools.approve_writes on
// Slack, the model's save_skill_reference call shows Approve/Deny buttons.
// The replica that paused the turn is killed and Approve on the other
// resumes it; forged, stale, unknown and another conversation's clicks
// and a non-approver's click change nothing; one click delivered to two
// replicas at once writes the reference once and the other hears who
// approved; Deny writes nothing and the model says so; an approval nobody
// decides updates its prompt as expired.
func TestSlackApprovalButtonsAcrossReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := approvalCluster(t)

	// The replica holding the turn dies while the prompt is pending.
	a := c.start(t)
	const r1 = "1700000400.000001"
	a.mentionIn(t, "C1", "EvKill", "U1", r1, "remember kill-proof")
	p1, id1 := c.prompt(t, "C1", r1)
	b := c.start(t)
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	if status := b.click(t, slacktest.Click(p1, "U1", "ann", "parley_approve", id1, c.slack.ResponseURL("k1")), slacktest.Secret, time.Now()); status != http.StatusOK {
		t.Fatalf("click: %d", status)
	}
	c.updatedWith(t, p1, "Approved")
	waitPost(t, c.slack, "C1", r1, "saved it")
	if got := strings.Count(c.saved(), "kill-proof"); got != 1 {
		t.Fatalf("the reference holds kill-proof %d times: %q", got, c.saved())
	}

	// Two replicas from here on.
	a = c.start(t)
	const r2 = "1700000400.000002"
	a.mentionIn(t, "C1", "EvTwo", "U1", r2, "remember two-replicas")
	p2, id2 := c.prompt(t, "C1", r2)

	// What changes nothing.
	approve := slacktest.Click(p2, "UADMIN", "boss", "parley_approve", id2, c.slack.ResponseURL("forged"))
	if s := b.click(t, approve, "not-the-secret", time.Now()); s != http.StatusUnauthorized {
		t.Errorf("a forged click: %d", s)
	}
	if s := b.click(t, approve, slacktest.Secret, time.Now().Add(-10*time.Minute)); s != http.StatusUnauthorized {
		t.Errorf("a stale click: %d", s)
	}
	a.click(t, slacktest.Click(p2, "UADMIN", "boss", "parley_approve", "NOSUCHAPPROVAL", c.slack.ResponseURL("unknown")), slacktest.Secret, time.Now())
	c.ephemeral(t, "unknown", "There is no pending approval with that code.")
	elsewhere := p2
	elsewhere.ThreadTS = r1 // the same id, clicked in another conversation
	b.click(t, slacktest.Click(elsewhere, "UADMIN", "boss", "parley_approve", id2, c.slack.ResponseURL("elsewhere")), slacktest.Secret, time.Now())
	c.ephemeral(t, "elsewhere", "There is no pending approval with that code.")
	a.click(t, slacktest.Click(p2, "U2", "bob", "parley_approve", id2, c.slack.ResponseURL("stranger")), slacktest.Secret, time.Now())
	c.ephemeral(t, "stranger", "You can't approve this.")
	if n := c.updates(p2); n != 0 || strings.Contains(c.saved(), "two-replicas") {
		t.Fatalf("a refused click changed something: %d updates, saved %q", n, c.saved())
	}
	for _, p := range c.slack.Posts() {
		if p.ResponseURL == "/response/forged" {
			t.Errorf("a forged click was answered: %+v", p)
		}
	}

	// One click delivered to both replicas at once.
	approve = slacktest.Click(p2, "UADMIN", "boss", "parley_approve", id2, c.slack.ResponseURL("both"))
	var wg sync.WaitGroup
	for _, rp := range []*replica{a, b} {
		wg.Go(func() {
			if s := rp.click(t, approve, slacktest.Secret, time.Now()); s != http.StatusOK {
				t.Errorf("click: %d", s)
			}
		})
	}
	wg.Wait()
	c.updatedWith(t, p2, "Approved")
	c.ephemeral(t, "both", "Already approved by boss.")
	waitPost(t, c.slack, "C1", r2, "saved it")
	if got := strings.Count(c.saved(), "two-replicas"); got != 1 {
		t.Fatalf("the reference holds two-replicas %d times: %q", got, c.saved())
	}

	// Deny.
	const r3 = "1700000400.000003"
	b.mentionIn(t, "C1", "EvDeny", "U1", r3, "remember never")
	p3, id3 := c.prompt(t, "C1", r3)
	a.click(t, slacktest.Click(p3, "UADMIN", "boss", "parley_deny", id3, c.slack.ResponseURL("deny")), slacktest.Secret, time.Now())
	c.updatedWith(t, p3, "Denied")
	waitPost(t, c.slack, "C1", r3, "not saved: denied by boss")
	if strings.Contains(c.saved(), "never") {
		t.Errorf("a denied call wrote %q", c.saved())
	}

	// Nobody decides.
	const r4 = "1700000400.000004"
	a.mentionIn(t, "CQUICK", "EvLate", "U1", r4, "remember late")
	p4, _ := c.prompt(t, "CQUICK", r4)
	c.updatedWith(t, p4, "Expired")
	waitPost(t, c.slack, "CQUICK", r4, "not saved: approval expired")
	if strings.Contains(c.saved(), "late") {
		t.Errorf("an expired call wrote %q", c.saved())
	}
	for _, thread := range []string{r1, r2, r3} {
		if n := c.answered("C1", thread, "saved it") + c.answered("C1", thread, "not saved: denied by boss"); n > 1 {
			t.Errorf("thread %s answered %d times", thread, n)
		}
	}
}

// TestSlackApprovalButtonsOverSocketMode: the same over Socket Mode: the
// mention and the click come over the connection, the click's envelope is
// acked, the reference is written once and the prompt updated.
func TestSlackApprovalButtonsOverSocketMode(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := approvalCluster(t)
	rp := c.start(t, "SLACK_APP_TOKEN="+slacktest.AppToken)
	slacktest.WaitFor(t, "a Socket Mode connection", 60*time.Second, func() bool { return c.slack.Connections() > 0 })
	const root = "1700000500.000001"
	if err := c.slack.SendEvent("env-mention", slacktest.Event("EvSock", slacktest.Mention("C1", "U1", root, "", "remember over-socket"))); err != nil {
		t.Fatal(err)
	}
	p, id := c.prompt(t, "C1", root)
	if err := c.slack.SendInteractive("env-click", slacktest.Click(p, "U1", "ann", "parley_approve", id, c.slack.ResponseURL("sock"))); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "the click acked", 60*time.Second, func() bool { return c.slack.Acked("env-click") })
	c.updatedWith(t, p, "Approved")
	waitPost(t, c.slack, "C1", root, "saved it")
	if got := strings.Count(c.saved(), "over-socket"); got != 1 {
		t.Fatalf("the reference holds over-socket %d times: %q\n%s", got, c.saved(), rp.stderr.String())
	}
}
