package slack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
)

// hrApp is a second Slack app in the fake workspace.
var hrApp = slacktest.App{BotToken: "xoxb-hr-token", AppToken: "xapp-hr-token", BotUserID: "UHRBOT", BotID: "BHRBOT"}

const hrSecret = "hr-signing-secret-0123456789abcdef"

// loadFile loads body as a configuration file and returns its problems.
func loadFile(t *testing.T, body string) (config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path, func(string) string { return "" })
}

// TestAccountsConfig: slack.accounts.NAME holds an app's keys beside the
// section's own, which stay the account named default; what an account
// leaves out it takes from the section; bad input is refused with its key
// and line.
func TestAccountsConfig(t *testing.T) {
	cfg, err := loadFile(t, `slack:
  bot_token: xoxb-ops
  signing_secret: ops-secret
  command: /ops
  follow_threads: false
  accounts:
    hr:
      bot_token: xoxb-hr
      signing_secret: hr-secret
      command: /hr
`)
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := config.Section[*Config](cfg, Name)
	if got := sec.AccountNames(); !slices.Equal(got, []string{"default", "hr"}) {
		t.Errorf("accounts = %v", got)
	}
	hr := sec.accounts()["hr"]
	if hr.BotToken.Reveal() != "xoxb-hr" || hr.Command != "/hr" || hr.FollowThreads || hr.APIURL != DefaultAPIURL || hr.Accounts != nil {
		t.Errorf("hr = %+v", hr)
	}

	for _, tt := range []struct {
		name, file string
		want       []string // each a substring of the error
	}{
		{"same bot token", `slack:
  bot_token: xoxb-one
  signing_secret: s1
  accounts:
    hr:
      bot_token: xoxb-one
      signing_secret: s2
`, []string{"line 6", "slack.accounts.hr.bot_token: the same bot_token as account default"}},
		{"same signing secret", `slack:
  accounts:
    a:
      bot_token: xoxb-a
      signing_secret: same
    b:
      bot_token: xoxb-b
      signing_secret: same
`, []string{"slack.accounts.b.signing_secret: the same signing_secret as account a"}},
		{"an account named default", `slack:
  bot_token: xoxb-one
  signing_secret: s1
  accounts:
    default:
      bot_token: xoxb-two
      signing_secret: s2
`, []string{"slack.accounts.default: the section's own keys are the account named default"}},
		{"a name that is no route", `slack:
  accounts:
    "Ops/Bot":
      bot_token: xoxb-a
      signing_secret: s
`, []string{`slack.accounts.Ops/Bot: an account's name is part of its routes`}},
		{"an account without a transport", `slack:
  accounts:
    hr:
      bot_token: xoxb-a
`, []string{"line 4", "slack.accounts.hr.signing_secret:"}},
		{"two problems of one account, each with its key", `slack:
  accounts:
    hr:
      bot_token: xoxb-a
      post_every: -1s
`, []string{"slack.accounts.hr.signing_secret:", "slack.accounts.hr.post_every: -1s is negative"}},
		{"an unknown key", `slack:
  accounts:
    hr:
      bot_tokn: xoxb-a
`, []string{"line 4", "bot_tokn"}},
		{"an account with nothing under it", `slack:
  bot_token: xoxb-one
  signing_secret: s1
  accounts:
    hr:
`, []string{"slack.accounts.hr.bot_token:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadFile(t, tt.file)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, secret := range []string{"xoxb-one", "xoxb-a", "same", "s1", "s2"} {
				if strings.Contains(err.Error(), ": "+secret) || strings.Contains(err.Error(), secret+"\n") {
					t.Errorf("error shows a secret %q:\n%v", secret, err)
				}
			}
		})
	}
}

// TestMaskedAccountsAreNoDuplicates: what `parley config check` prints
// (every secret as the mask) reads back without two accounts' masks
// counting as one shared credential; the mask is warned about instead.
func TestMaskedAccountsAreNoDuplicates(t *testing.T) {
	if _, err := loadFile(t, `slack:
  accounts:
    a:
      bot_token: <secret>
      signing_secret: <secret>
    b:
      bot_token: <secret>
      signing_secret: <secret>
`); err != nil {
		t.Fatal(err)
	}
}

// accountsFixture is two Slack apps of one deployment on one fake Slack
// and one server: the default at /slack/events, hr at /slack/events/hr.
type accountsFixture struct {
	slack   *slacktest.Server
	ops, hr *Adapter
	h       *recorder
	m       *metrics.Metrics
	url     string
	at      time.Time
}

func newAccountsFixture(t *testing.T) *accountsFixture {
	t.Helper()
	f := &accountsFixture{slack: slacktest.New(t), h: &recorder{}, m: metrics.New(), at: time.Now()}
	f.slack.AddApp(hrApp)
	section := Config{
		BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, APIURL: f.slack.APIURL(), FollowThreads: true,
		Accounts: map[string]*Account{"hr": {BotToken: config.Secret(hrApp.BotToken), SigningSecret: hrSecret}},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	accs := section.accounts()
	var err error
	opts := Options{Handler: f.h, Now: func() time.Time { return f.at }, RetryWait: 5 * time.Millisecond, ReconnectWait: 10 * time.Millisecond}
	if f.ops, err = New(accs["default"], opts, f.m, log); err != nil {
		t.Fatal(err)
	}
	opts.Account = "hr"
	if f.hr, err = New(accs["hr"], opts, f.m, log); err != nil {
		t.Fatal(err)
	}
	f.ops.peers, f.hr.peers = []*Adapter{f.hr}, []*Adapter{f.ops}
	for _, a := range []*Adapter{f.ops, f.hr} {
		if err := a.Identify(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	f.ops.Mount(mux)
	f.hr.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(f.h.wg.Wait)
	f.url = srv.URL
	return f
}

// post delivers an Events API payload to path signed with secret.
func (f *accountsFixture) post(t *testing.T, path, secret string, payload any) int {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := slacktest.Do(t, slacktest.Signed(t, f.url+path, secret, f.at, body))
	return status
}

// TestTwoAppsAnswerOnlyTheirOwn: two apps in one channel each take only
// the events signed with their own secret, delivered to their own route
// and mentioning their own bot, into a conversation of their own; a
// follow-up in a thread one app follows that calls the other app is not
// the first one's; and a message delivered to the wrong app's route fails
// its signature check.
func TestTwoAppsAnswerOnlyTheirOwn(t *testing.T) {
	f := newAccountsFixture(t)
	if got := f.post(t, "/slack/events", slacktest.Secret, slacktest.Event("Ev1", slacktest.Mention("C1", "U1", "100.1", "", "deploy?"))); got != http.StatusOK {
		t.Fatalf("ops mention: %d", got)
	}
	if got := f.post(t, "/slack/events/hr", hrSecret, slacktest.EventTo(hrApp, "Ev2", slacktest.MentionOf(hrApp, "C1", "U1", "100.1", "", "holidays?"))); got != http.StatusOK {
		t.Fatalf("hr mention: %d", got)
	}
	// Wrong route for the secret: each refused, counted, nothing submitted.
	for _, tt := range []struct{ path, secret string }{{"/slack/events", hrSecret}, {"/slack/events/hr", slacktest.Secret}, {"/slack/commands/hr", slacktest.Secret}, {"/slack/interactions/hr", slacktest.Secret}} {
		if got := f.post(t, tt.path, tt.secret, slacktest.Event("Ev3", slacktest.Mention("C1", "U1", "100.2", "", "x"))); got != http.StatusUnauthorized {
			t.Errorf("%s signed with the other app's secret: %d, want 401", tt.path, got)
		}
	}
	// In the thread both apps take part in, a follow-up that calls the
	// hr bot is hr's (its app_mention carries it), not the ops app's.
	if got := f.post(t, "/slack/events", slacktest.Secret, slacktest.Event("Ev4", slacktest.Message("C1", "channel", "U1", "100.3", "100.1", "<@"+hrApp.BotUserID+"> and sick days?"))); got != http.StatusOK {
		t.Fatalf("follow-up: %d", got)
	}
	// A follow-up that calls nobody continues the ops conversation.
	if got := f.post(t, "/slack/events", slacktest.Secret, slacktest.Event("Ev5", slacktest.Message("C1", "channel", "U1", "100.4", "100.1", "and rollback?"))); got != http.StatusOK {
		t.Fatalf("follow-up: %d", got)
	}
	msgs := f.h.messages()
	var got []string
	for _, m := range msgs {
		got = append(got, m.ID+" "+m.Account+" "+m.ConversationKey()+" "+m.Text)
	}
	want := []string{
		"Ev1  slack:T0PARLEY:C1:100.1 deploy?",
		"Ev2 hr slack/hr:T0PARLEY:C1:100.1 holidays?",
		"Ev5  slack:T0PARLEY:C1:100.1 and rollback?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("submitted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each answers from its own app.
	for _, m := range msgs[:2] {
		a := map[string]*Adapter{"": f.ops, "hr": f.hr}[m.Account]
		if err := a.Send(t.Context(), m, channels.Reply{Text: "answer to " + m.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if p := f.slack.By(slacktest.BotUserID); len(p) != 1 || p[0].Text != "answer to Ev1" {
		t.Errorf("ops app posted %+v", p)
	}
	if p := f.slack.By(hrApp.BotUserID); len(p) != 1 || p[0].Text != "answer to Ev2" {
		t.Errorf("hr app posted %+v", p)
	}
}

// TestRevokedAccountIsDownTheOtherServes: once Slack refuses one app's
// token, that account is down (Ready names why, parley_account_up is 0)
// while the other app keeps answering; signing in again brings it back.
func TestRevokedAccountIsDownTheOtherServes(t *testing.T) {
	f := newAccountsFixture(t)
	f.slack.Revoke(hrApp.BotToken)
	m := channels.Message{Channel: Name, Account: "hr", Workspace: slacktest.TeamID, Chat: "C1", Thread: "100.1", Meta: map[string]string{MetaThreadTS: "100.1"}}
	if err := f.hr.Send(t.Context(), m, channels.Reply{Text: "hello"}); err == nil {
		t.Fatal("a revoked app posted")
	}
	if err := f.hr.Ready(); err == nil || !strings.Contains(err.Error(), "token_revoked") {
		t.Errorf("hr ready: %v", err)
	}
	if err := f.ops.Ready(); err != nil {
		t.Errorf("ops ready: %v", err)
	}
	if v := gaugeValue(f.m, "hr"); v != 0 {
		t.Errorf("parley_account_up{account=hr} = %v", v)
	}
	if v := gaugeValue(f.m, "default"); v != 1 {
		t.Errorf("parley_account_up{account=default} = %v", v)
	}
	m.Account = ""
	if err := f.ops.Send(t.Context(), m, channels.Reply{Text: "still here"}); err != nil {
		t.Fatal(err)
	}
	if p := f.slack.By(slacktest.BotUserID); len(p) != 1 {
		t.Errorf("ops app posted %+v", p)
	}
	for _, p := range f.slack.Posts() {
		if strings.Contains(p.Text, hrApp.BotToken) {
			t.Error("a token reached a post")
		}
	}
}

func gaugeValue(m *metrics.Metrics, account string) float64 {
	return testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, account))
}

// TestSocketModeRunsOneConnectionPerAccount: OpenAccounts opens an
// adapter per account; each holds its own Socket Mode connection with its
// own app token, and what arrives on one app's connection is submitted as
// that app's message, while parley_account_up shows each app connected.
func TestSocketModeRunsOneConnectionPerAccount(t *testing.T) {
	// Not parallel: stopping Run waits for slack-go's goroutines.
	fake := slacktest.New(t)
	fake.AddApp(hrApp)
	h := &recorder{}
	m := metrics.New()
	section := DefaultConfig()
	section.BotToken, section.AppToken, section.APIURL = slacktest.BotToken, slacktest.AppToken, fake.APIURL()
	section.Accounts = map[string]*Account{"hr": {BotToken: config.Secret(hrApp.BotToken), AppToken: config.Secret(hrApp.AppToken)}}
	if err := section.Validate(); err != nil {
		t.Fatal(err)
	}
	chs, err := section.OpenAccounts(t.Context(), channels.Deps{Handler: h, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 2 {
		t.Fatalf("%d adapters", len(chs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(chs))
	for _, ch := range chs {
		go func() { done <- ch.(channels.Runner).Run(ctx, h) }()
	}
	defer func() {
		for range chs {
			stopRun(t, cancel, done)
		}
	}()
	slacktest.WaitFor(t, "both apps to connect", deadline, func() bool {
		for _, ch := range chs {
			if ch.(channels.Health).Ready() != nil {
				return false
			}
		}
		return fake.ConnectionsOf(slacktest.DefaultApp) == 1 && fake.ConnectionsOf(hrApp) == 1
	})
	for _, account := range []string{"default", "hr"} {
		if v := testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, account)); v != 1 {
			t.Errorf("parley_account_up{account=%s} = %v", account, v)
		}
	}
	if err := fake.SendEventTo(hrApp, "env-hr", slacktest.EventTo(hrApp, "EvHr", slacktest.MentionOf(hrApp, "C1", "U1", "60.1", "", "over the socket"))); err != nil {
		t.Fatal(err)
	}
	if err := fake.SendEventTo(slacktest.DefaultApp, "env-ops", slacktest.Event("EvOps", slacktest.Mention("C1", "U1", "60.2", "", "ops socket"))); err != nil {
		t.Fatal(err)
	}
	slacktest.WaitFor(t, "both messages", deadline, func() bool { return len(h.messages()) == 2 })
	got := map[string]string{}
	for _, msg := range h.messages() {
		got[msg.ID] = msg.Account + " " + msg.Text
	}
	if got["EvHr"] != "hr over the socket" || got["EvOps"] != " ops socket" {
		t.Errorf("submitted %v", got)
	}
}
