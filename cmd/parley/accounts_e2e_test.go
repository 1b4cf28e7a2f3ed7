package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/sessions"
)

// hrApp is a second Slack app of the deployment (slack.accounts.hr).
var hrApp = slacktest.App{BotToken: "xoxb-hr-token", AppToken: "xapp-hr-token", BotUserID: "UHRBOT", BotID: "BHRBOT"}

const hrSecret = "hr-signing-secret-0123456789abcdef"

// The accounts cluster's profiles: ops for the platform (so the default
// app), hr at the hr app's account level, oncall at one chat's level.
const (
	opsPrompt    = "You are Ops Bot, the on-call assistant of the platform team. Answer in one or two lines."
	hrPrompt     = "You are HR Helper. Be polite and never discuss anyone's salary."
	oncallPrompt = "You are the incident channel's assistant. Answer tersely, with the runbook's step."
	oncallChat   = "C_ONCALL"
)

// newAccountsCluster is a cluster whose file adds the hr app beside the
// section's own (the default account, from the environment).
func newAccountsCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t)
	c.slack.AddApp(hrApp)
	c.cfg = writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
slack:
  post_every: 20ms
  accounts:
    hr:
      bot_token: %s
      signing_secret: %s
sessions:
  lock_ttl: 2s
profiles:
  ops:
    system_prompt: %q
  hr:
    system_prompt_append: %q
    display_name: HR Helper
  oncall:
    system_prompt: %q
policies:
  platforms:
    slack:
      profile: ops
      accounts:
        hr: {profile: hr}
      workspaces:
        %s:
          chats:
            %s: {profile: oncall}
`, c.redis.Prefix, hrApp.BotToken, hrSecret, opsPrompt, hrPrompt, oncallPrompt, slacktest.TeamID, oncallChat))
	return c
}

// deliver posts an Events API payload to path, signed with secret, and
// returns the status.
func (rp *replica) deliver(t *testing.T, path, secret string, payload any) int {
	t.Helper()
	body, _ := json.Marshal(payload)
	status, _ := slacktest.Do(t, slacktest.Signed(t, rp.base+path, secret, time.Now(), body))
	return status
}

// readyz returns /readyz's status and body.
func (rp *replica) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get(rp.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// systemMessages returns the system message, as the bytes on the wire,
// of each request the model got whose last message has text in it.
func systemMessages(t *testing.T, model *openaitest.Server, text string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, body := range model.RawRequests() {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) < 2 {
			t.Fatalf("model request %s: %v", body, err)
		}
		if bytes.Contains(req.Messages[len(req.Messages)-1], []byte(text)) {
			out = append(out, req.Messages[0])
		}
	}
	return out
}

// systemContent decodes a system message's content.
func systemContent(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m struct{ Role, Content string }
	if err := json.Unmarshal(raw, &m); err != nil || m.Role != "system" {
		t.Fatalf("system message %s: %v", raw, err)
	}
	return m.Content
}

// sameSystemMessage returns the system message of the model's requests
// for texts, failing unless there is one and every such request sent the
// very same bytes.
func sameSystemMessage(t *testing.T, model *openaitest.Server, texts ...string) json.RawMessage {
	t.Helper()
	var first json.RawMessage
	for _, text := range texts {
		sys := systemMessages(t, model, text)
		if len(sys) == 0 {
			t.Fatalf("no model request has %q", text)
		}
		for _, m := range sys {
			if first == nil {
				first = m
			}
			if !bytes.Equal(m, first) {
				t.Fatalf("the system message of a request for %q differs from the first:\n%s\n%s", text, m, first)
			}
		}
	}
	return first
}

// postsBy counts the posts the bot user made with text in them.
func postsBy(c *cluster, bot, text string) int {
	n := 0
	for _, p := range c.slack.By(bot) {
		if strings.Contains(p.Text, text) {
			n++
		}
	}
	return n
}

// TestTwoSlackAppsOnTwoReplicas: two Slack apps (two signing secrets, two
// bot users) served by two replicas of one deployment. Each app answers
// only the events signed with its own secret at its own route and
// mentioning its own bot, once, from its own bot, in a conversation of
// its own; an event delivered to the other app's route is refused. Each
// answers with its own profile's system prompt, the same bytes on both
// replicas, and a chat's profile beats the platform's across twenty
// turns of two conversations. Once one app's token is revoked, /readyz,
// parley_account_up and the console's overview show that account down
// (naming no secret) while the replica stays ready, and the other app
// keeps answering.
func TestTwoSlackAppsOnTwoReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newAccountsCluster(t)
	consoleA, consoleB := freeAddr(t), freeAddr(t)
	a := c.start(t, "PARLEY_ADMIN_TOKEN="+adminToken, "PARLEY_ADMIN_LISTEN="+consoleA)
	b := c.start(t, "PARLEY_ADMIN_TOKEN="+adminToken, "PARLEY_ADMIN_LISTEN="+consoleB)
	console := map[*replica]string{a: "http://" + consoleA, b: "http://" + consoleB}
	const root = "1700000900.000001"
	ops := slacktest.Event("EvOps", slacktest.Mention("C1", "U1", root, "", "deploy status"))
	hr := slacktest.EventTo(hrApp, "EvHr", slacktest.MentionOf(hrApp, "C1", "U1", root, "", "holiday policy"))
	// Each event reaches both replicas, as a retried delivery would.
	for _, rp := range []*replica{a, b} {
		if s := rp.deliver(t, "/slack/events", slacktest.Secret, ops); s != http.StatusOK {
			t.Fatalf("ops event: %d", s)
		}
		if s := rp.deliver(t, "/slack/events/hr", hrSecret, hr); s != http.StatusOK {
			t.Fatalf("hr event: %d", s)
		}
		// The wrong app's route: its signature does not verify.
		if s := rp.deliver(t, "/slack/events/hr", slacktest.Secret, ops); s != http.StatusUnauthorized {
			t.Errorf("ops event at the hr route: %d, want 401", s)
		}
		if s := rp.deliver(t, "/slack/events", hrSecret, hr); s != http.StatusUnauthorized {
			t.Errorf("hr event at the ops route: %d, want 401", s)
		}
	}
	slacktest.WaitFor(t, "both answers", 60*time.Second, func() bool {
		return postsBy(c, slacktest.BotUserID, "echo: deploy status") > 0 && postsBy(c, hrApp.BotUserID, "echo: holiday policy") > 0
	})
	// A marker after the duplicates, in each app's thread.
	b.deliver(t, "/slack/events", slacktest.Secret, slacktest.Event("EvOps2", slacktest.Mention("C1", "U1", "1700000900.000002", root, "ops marker")))
	a.deliver(t, "/slack/events/hr", hrSecret, slacktest.EventTo(hrApp, "EvHr2", slacktest.MentionOf(hrApp, "C1", "U1", "1700000900.000003", root, "hr marker")))
	slacktest.WaitFor(t, "the markers", 60*time.Second, func() bool {
		return postsBy(c, slacktest.BotUserID, "echo: ops marker") > 0 && postsBy(c, hrApp.BotUserID, "echo: hr marker") > 0
	})
	for _, tt := range []struct{ bot, text string }{
		{slacktest.BotUserID, "echo: deploy status"}, {hrApp.BotUserID, "echo: holiday policy"},
	} {
		if n := postsBy(c, tt.bot, tt.text); n != 1 {
			t.Errorf("%s answered %q %d times", tt.bot, tt.text, n)
		}
	}
	if n := postsBy(c, hrApp.BotUserID, "deploy status") + postsBy(c, slacktest.BotUserID, "holiday policy"); n != 0 {
		t.Errorf("an app answered the other's message %d times", n)
	}
	// Each app answered with its own profile's system prompt, the same
	// bytes for each of its turns whichever replica took it: the
	// platform's ops profile (instead of the default prompt) for the
	// default app, and hr's lines appended to the default prompt, chosen
	// at the hr app's account level, for hr.
	opsSystem := sameSystemMessage(t, c.model, "deploy status", "ops marker")
	if got := systemContent(t, opsSystem); !strings.Contains(got, opsPrompt) || strings.Contains(got, agent.DefaultSystemPrompt) || strings.Contains(got, hrPrompt) {
		t.Errorf("the ops app's system prompt is not the ops profile's alone:\n%s", got)
	}
	hrSystem := sameSystemMessage(t, c.model, "holiday policy", "hr marker")
	if got := systemContent(t, hrSystem); !strings.Contains(got, agent.DefaultSystemPrompt+"\n\n"+hrPrompt) || strings.Contains(got, opsPrompt) {
		t.Errorf("the hr app's system prompt is not the default with hr's lines appended:\n%s", got)
	}

	// The on-call channel's profile, chosen at its chat's level, beats
	// the platform's: twenty turns of each of two conversations there,
	// delivered to the two replicas in turn, all send the oncall
	// profile's system message, byte for byte.
	const turns = 20
	for i := range turns {
		for conv := range 2 {
			root := fmt.Sprintf("1700000910.%06d", conv*100)
			ts, thread := fmt.Sprintf("1700000910.%06d", conv*100+i), root
			if i == 0 {
				thread = ""
			}
			text := fmt.Sprintf("oncall conversation %d turn %d", conv, i)
			[]*replica{a, b}[(i+conv)%2].deliver(t, "/slack/events", slacktest.Secret,
				slacktest.Event(fmt.Sprintf("EvOncall-%d-%d", conv, i), slacktest.Mention(oncallChat, "U1", ts, thread, text)))
		}
		slacktest.WaitFor(t, fmt.Sprintf("the answers of turn %d", i), 60*time.Second, func() bool {
			return postsBy(c, slacktest.BotUserID, fmt.Sprintf("conversation 0 turn %d", i)) > 0 && postsBy(c, slacktest.BotUserID, fmt.Sprintf("conversation 1 turn %d", i)) > 0
		})
	}
	if n := len(systemMessages(t, c.model, "oncall conversation")); n != 2*turns {
		t.Errorf("%d model requests for the on-call turns, want %d", n, 2*turns)
	}
	oncallSystem := sameSystemMessage(t, c.model, "oncall conversation")
	if got := systemContent(t, oncallSystem); !strings.Contains(got, oncallPrompt) || strings.Contains(got, opsPrompt) {
		t.Errorf("the on-call channel's system prompt is not the oncall profile's:\n%s", got)
	}

	// One thread, two conversations: the default account's key is the
	// one it always had, hr's names the account.
	store := sessions.NewRedis(c.redis.Client, sessions.Options{Prefix: c.redis.Prefix})
	for key, want := range map[string]string{
		"slack:" + slacktest.TeamID + ":C1:" + root:    "deploy status",
		"slack/hr:" + slacktest.TeamID + ":C1:" + root: "holiday policy",
	} {
		h, err := store.History(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 || h[0].Content != want {
			t.Errorf("history %s = %+v, want it to start with %q", key, h, want)
		}
	}

	// The hr app's token is revoked: its next message fails on Slack's
	// side, that account shows down, the replicas stay ready for the
	// default app, which keeps answering.
	c.slack.Revoke(hrApp.BotToken)
	a.deliver(t, "/slack/events/hr", hrSecret, slacktest.EventTo(hrApp, "EvHr3", slacktest.MentionOf(hrApp, "C1", "U1", "1700000901.000001", "", "after revocation")))
	// The replica that saw the refusal says so in /readyz, in
	// parley_account_up, where the default app stays up, and on its
	// console's overview, hr's row down with why, the default's up.
	var saw *replica
	var readyz, overview string
	slacktest.WaitFor(t, "a replica to show the hr account down", 60*time.Second, func() bool {
		for _, rp := range []*replica{a, b} {
			status, body := rp.readyz(t)
			if status != http.StatusOK || !strings.Contains(body, "degraded: slack/hr: ") || !strings.Contains(body, "token_revoked") ||
				!metricLine(rp.base, `parley_account_up{account="hr",channel="slack"} 0`) || !metricLine(rp.base, `parley_account_up{account="default",channel="slack"} 1`) {
				continue
			}
			if _, page := adminGet(t, console[rp], "/admin/"); strings.Contains(page, "token_revoked") {
				saw, readyz, overview = rp, body, page
				return true
			}
		}
		return false
	})
	hrRow := regexp.MustCompile(`(?s)<tr class="account">\s*<td>slack</td><td><code>hr</code></td>\s*<td><span class="health bad">down</span> \(([^<]*)\)</td>\s*<td>webhooks at /slack/events/hr, /slack/commands/hr, /slack/interactions/hr</td>`)
	if m := hrRow.FindStringSubmatch(overview); m == nil || !strings.Contains(m[1], "token_revoked") {
		t.Errorf("the console's overview does not show slack/hr down with why:\n%s", overview)
	}
	if !regexp.MustCompile(`(?s)<td>slack</td><td><code>default</code></td>\s*<td><span class="health ok">up</span></td>\s*<td>webhooks at /slack/events, `).MatchString(overview) {
		t.Errorf("the console's overview does not show slack/default up:\n%s", overview)
	}
	for what, text := range map[string]string{"/readyz": readyz, "the overview": overview} {
		if strings.Contains(text, hrApp.BotToken) || strings.Contains(text, hrSecret) {
			t.Errorf("%s of %s shows the hr app's credentials", what, saw.base)
		}
	}
	b.deliver(t, "/slack/events", slacktest.Secret, slacktest.Event("EvOps3", slacktest.Mention("C1", "U1", "1700000902.000001", "", "still there?")))
	slacktest.WaitFor(t, "the ops app to answer after hr's revocation", 60*time.Second, func() bool {
		return postsBy(c, slacktest.BotUserID, "echo: still there?") == 1
	})
	for _, rp := range []*replica{a, b} {
		if strings.Contains(rp.stderr.String(), hrApp.BotToken) || strings.Contains(rp.stderr.String(), hrSecret) {
			t.Error("the hr app's credentials reached the log")
		}
	}
}
