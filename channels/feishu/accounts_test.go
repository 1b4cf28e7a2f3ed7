package feishu

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
)

// hrApp is a second Feishu app ("HR Helper") in the fake tenant.
var hrApp = feishutest.App{AppID: "cli_hr", AppSecret: "hr-secret", BotOpenID: "ou_hr_bot"}

const (
	hrToken = "hr-vtoken"
	hrKey   = "hr-enc-key"
)

// TestFeishuAccountsConfig: feishu.accounts.NAME holds an app's keys
// beside the section's own (the account named default), takes what it
// leaves out from the section, and is refused with its key when it
// shares another account's credentials or cannot be a route.
func TestFeishuAccountsConfig(t *testing.T) {
	c := DefaultConfig()
	c.AppID, c.AppSecret, c.EncryptKey, c.Mode = "cli_ops", "s1", "k1", ModeWebhook
	c.Accounts = map[string]*Account{"hr": {AppID: "cli_hr", AppSecret: "s2", EncryptKey: "k2"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.AccountNames(); !slices.Equal(got, []string{"default", "hr"}) {
		t.Errorf("accounts = %v", got)
	}
	if hr := c.accounts()["hr"]; hr.AppID != "cli_hr" || hr.Mode != ModeWebhook || !hr.ReplyInThread || hr.Accounts != nil {
		t.Errorf("hr = %+v", hr)
	}
	for _, tt := range []struct {
		name string
		acc  map[string]*Account
		want string
	}{
		{"same app id", map[string]*Account{"hr": {AppID: "cli_ops", AppSecret: "s2", EncryptKey: "k2"}}, "accounts.hr.app_id: the same app_id as account default"},
		{"same encrypt key", map[string]*Account{"hr": {AppID: "cli_hr", AppSecret: "s2", EncryptKey: "k1"}}, "accounts.hr.encrypt_key: the same encrypt_key as account default"},
		{"named default", map[string]*Account{"default": {AppID: "cli_hr", AppSecret: "s2", EncryptKey: "k2"}}, "accounts.default: the section's own keys"},
		{"no route", map[string]*Account{"HR Bot": {AppID: "cli_hr", AppSecret: "s2", EncryptKey: "k2"}}, "accounts.HR Bot: an account's name is part of its route"},
		{"no secret", map[string]*Account{"hr": {AppID: "cli_hr", EncryptKey: "k2"}}, "accounts.hr.app_id: set both"},
		{"nothing under it", map[string]*Account{"hr": nil}, "accounts.hr.app_id: an account is an app"},
		{"no credentials", map[string]*Account{"hr": {Mode: ModeWebsocket}}, "accounts.hr.app_id: an account is an app"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := *c
			bad.Accounts = tt.acc
			err := bad.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			for _, secret := range []string{"s1", "s2", "k1", "k2"} {
				if strings.Contains(err.Error(), " "+secret) {
					t.Errorf("error shows %q: %v", secret, err)
				}
			}
		})
	}
}

// TestTwoFeishuAppsInOneGroupEachAnswerTheirOwnMention: two apps in one
// group get every message of it (the group-message scope); each submits
// once only what mentions its own bot, into a conversation of its own,
// answers from its own bot, and refuses what is sealed with the other
// app's key at its route.
func TestTwoFeishuAppsInOneGroupEachAnswerTheirOwnMention(t *testing.T) {
	api := feishutest.New(t)
	api.AddApp(hrApp)
	now := time.Unix(1_700_000_000, 0)
	section := DefaultConfig()
	section.AppID, section.AppSecret, section.VerificationToken, section.EncryptKey = "cli_ops", "ops-secret", testToken, testKey
	section.BaseURL, section.Mode = api.URL, ModeWebhook
	section.Accounts = map[string]*Account{"hr": {AppID: hrApp.AppID, AppSecret: config.Secret(hrApp.AppSecret), VerificationToken: hrToken, EncryptKey: hrKey}}
	if err := section.Validate(); err != nil {
		t.Fatal(err)
	}
	recs := map[string]*recorder{"": {}, "hr": {}}
	adapters := map[string]*Adapter{}
	mux := http.NewServeMux()
	m := metrics.New()
	for name, cfg := range section.accounts() {
		account := map[string]string{"default": "", "hr": "hr"}[name]
		a, err := New(cfg, Options{Handler: recs[account], Now: func() time.Time { return now }, RetryBase: 10 * time.Millisecond, ChatInterval: time.Millisecond, Account: account},
			m, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		a.Mount(mux)
		adapters[account] = a
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func(path, token, key string, msg feishutest.Message) int {
		t.Helper()
		msg.Token = token
		resp, err := http.DefaultClient.Do(feishutest.Request(srv.URL+path, feishutest.Encrypted(feishutest.Event(msg), key), key, now))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	opsBot := feishutest.Mention{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Ops Bot"}
	hrBot := feishutest.Mention{Key: "@_user_1", OpenID: hrApp.BotOpenID, Name: "HR Helper"}
	group := []feishutest.Message{
		{MessageID: "om_ops", ChatID: "oc_group", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 deploy?"), Mentions: []feishutest.Mention{opsBot}},
		{MessageID: "om_hr", ChatID: "oc_group", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 holidays?"), Mentions: []feishutest.Mention{hrBot}},
	}
	// Feishu delivers every group message to each app, twice here (a
	// re-push), each sealed with that app's own key.
	for range 2 {
		for _, msg := range group {
			if s := post(EventsPath, testToken, testKey, msg); s != http.StatusOK {
				t.Fatalf("ops route: %d", s)
			}
			if s := post(EventsPath+"/hr", hrToken, hrKey, msg); s != http.StatusOK {
				t.Fatalf("hr route: %d", s)
			}
		}
	}
	// Sealed with the other app's key: refused at each route.
	if s := post(EventsPath+"/hr", testToken, testKey, group[1]); s == http.StatusOK {
		t.Error("the hr route took an event sealed with the ops app's key")
	}
	if s := post(EventsPath, hrToken, hrKey, group[0]); s == http.StatusOK {
		t.Error("the ops route took an event sealed with the hr app's key")
	}
	for account, want := range map[string]string{"": "om_ops deploy?", "hr": "om_hr holidays?"} {
		msgs := recs[account].messages()
		if len(msgs) != 1 || msgs[0].ID+" "+msgs[0].Text != want || msgs[0].Account != account {
			t.Fatalf("account %q submitted %+v, want %q once", account, msgs, want)
		}
		if err := adapters[account].Send(t.Context(), msgs[0], channels.Reply{Text: "answer to " + msgs[0].ID}); err != nil {
			t.Fatal(err)
		}
	}
	if k := recs["hr"].messages()[0].ConversationKey(); !strings.HasPrefix(k, "feishu/hr:") {
		t.Errorf("hr's conversation key %q", k)
	}
	for bot, want := range map[string]string{feishutest.BotOpenID: "answer to om_ops", hrApp.BotOpenID: "answer to om_hr"} {
		sent := api.SentBy(bot)
		if len(sent) != 1 || !strings.Contains(sent[0].Text, want) {
			t.Errorf("bot %s sent %+v, want %q", bot, sent, want)
		}
	}
}

// TestLongConnectionPerAccount: OpenAccounts opens an adapter per account;
// each holds its own long connection, what Feishu pushes on one app's
// connection is submitted as that app's message (and only a mention of
// its own bot), and parley_account_up shows each app up.
func TestLongConnectionPerAccount(t *testing.T) {
	// Not parallel: like the other long-connection tests, it waits for
	// the adapters' goroutines.
	api := feishutest.New(t)
	api.AddApp(hrApp)
	section := DefaultConfig()
	section.AppID, section.AppSecret, section.BaseURL = "cli_ops", "ops-secret", api.URL
	section.Accounts = map[string]*Account{"hr": {AppID: hrApp.AppID, AppSecret: config.Secret(hrApp.AppSecret)}}
	if err := section.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &accountsRecorder{byAccount: map[string][]channels.Message{}}
	m := metrics.New()
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
	t.Cleanup(func() {
		cancel()
		for range chs {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
	waitUntil(t, "both long connections", func() bool {
		for _, ch := range chs {
			if ch.(channels.Health).Ready() != nil {
				return false
			}
		}
		return api.ConnectionsOf("cli_ops") == 1 && api.ConnectionsOf(hrApp.AppID) == 1
	})
	waitUntil(t, "both apps up", func() bool {
		return testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, "default")) == 1 && testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, "hr")) == 1
	})
	hrBot := feishutest.Mention{Key: "@_user_1", OpenID: hrApp.BotOpenID, Name: "HR Helper"}
	opsBot := feishutest.Mention{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Ops Bot"}
	toHR := feishutest.Event(feishutest.Message{MessageID: "om_1", ChatID: "oc_g", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 leave?"), Mentions: []feishutest.Mention{hrBot}})
	toOps := feishutest.Event(feishutest.Message{MessageID: "om_2", ChatID: "oc_g", ChatType: "group", Sender: "ou_alice", Content: feishutest.Text("@_user_1 deploy?"), Mentions: []feishutest.Mention{opsBot}})
	pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer pcancel()
	// Both apps are in the group: each connection gets both messages.
	for _, app := range []string{"cli_ops", hrApp.AppID} {
		for _, ev := range [][]byte{toHR, toOps} {
			if code, err := api.PushTo(pctx, app, ev); err != nil || code != http.StatusOK {
				t.Fatalf("push to %s: %d %v", app, code, err)
			}
		}
	}
	waitUntil(t, "each app's message", func() bool { return h.count() == 2 })
	if got := h.texts(""); !slices.Equal(got, []string{"om_2 deploy?"}) {
		t.Errorf("default account took %v", got)
	}
	if got := h.texts("hr"); !slices.Equal(got, []string{"om_1 leave?"}) {
		t.Errorf("hr account took %v", got)
	}
}

// accountsRecorder records submitted messages by account.
type accountsRecorder struct {
	mu        sync.Mutex
	byAccount map[string][]channels.Message
}

func (r *accountsRecorder) Submit(_ context.Context, m channels.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byAccount[m.Account] = append(r.byAccount[m.Account], m)
	return nil
}

func (r *accountsRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ms := range r.byAccount {
		n += len(ms)
	}
	return n
}

func (r *accountsRecorder) texts(account string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.byAccount[account] {
		out = append(out, m.ID+" "+m.Text)
	}
	return out
}
