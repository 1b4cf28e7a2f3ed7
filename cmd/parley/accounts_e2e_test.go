package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/sessions"
)

// hrApp is a second Slack app of the deployment (slack.accounts.hr).
var hrApp = slacktest.App{BotToken: "xoxb-hr-token", AppToken: "xapp-hr-token", BotUserID: "UHRBOT", BotID: "BHRBOT"}

const hrSecret = "hr-signing-secret-0123456789abcdef"

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
`, c.redis.Prefix, hrApp.BotToken, hrSecret))
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
// its own; an event delivered to the other app's route is refused; once
// one app's token is revoked, /readyz names that account while the
// replica stays ready, and the other app keeps answering.
func TestTwoSlackAppsOnTwoReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newAccountsCluster(t)
	a, b := c.start(t), c.start(t)
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
	slacktest.WaitFor(t, "a replica to show the hr account down", 60*time.Second, func() bool {
		for _, rp := range []*replica{a, b} {
			if status, body := rp.readyz(t); status == http.StatusOK && strings.Contains(body, "degraded: slack/hr: ") && strings.Contains(body, "token_revoked") {
				return true
			}
		}
		return false
	})
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
