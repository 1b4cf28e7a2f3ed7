package officialaccount

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// A second Official Account ("HR"), in safe mode with its own token and key.
const (
	hrAppID  = "wx-hr-account"
	hrSecret = "hr-app-secret"
	hrToken  = "hrCallbackToken"
	hrAESKey = "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210zyxwvut"
)

// TestOfficialAccountsConfig: wechat_oa.accounts.NAME holds one Official
// Account's keys beside the section's own (the account named default),
// takes what it leaves out from the section, and is refused with its key
// when it is another account's app, shares the token or key that signs
// and seals callbacks, or cannot be a route.
func TestOfficialAccountsConfig(t *testing.T) {
	c := DefaultConfig()
	c.AppID, c.AppSecret, c.Token, c.EncodingAESKey = testAppID, testSecret, testToken, testAESKey
	c.BaseURL = "https://oa-proxy.example"
	c.Accounts = map[string]*AccountConfig{"hr": {AppID: hrAppID, AppSecret: hrSecret, Token: hrToken, EncodingAESKey: hrAESKey}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.AccountNames(); !slices.Equal(got, []string{"default", "hr"}) {
		t.Errorf("accounts = %v", got)
	}
	if hr := c.accounts()["hr"]; hr.AppID != hrAppID || hr.BaseURL != "https://oa-proxy.example" || hr.Accounts != nil {
		t.Errorf("hr = %+v", hr)
	}
	hr := func(edit func(*AccountConfig)) map[string]*AccountConfig {
		a := &AccountConfig{AppID: hrAppID, AppSecret: hrSecret, Token: hrToken, EncodingAESKey: hrAESKey}
		edit(a)
		return map[string]*AccountConfig{"hr": a}
	}
	for _, tt := range []struct {
		name string
		acc  map[string]*AccountConfig
		want string
	}{
		{"same app id", hr(func(a *AccountConfig) { a.AppID = testAppID }), "accounts.hr.app_id: the same app_id as account default"},
		{"same token", hr(func(a *AccountConfig) { a.Token = testToken }), "accounts.hr.token: the same token as account default"},
		{"same key", hr(func(a *AccountConfig) { a.EncodingAESKey = testAESKey }), "accounts.hr.encoding_aes_key: the same encoding_aes_key as account default"},
		{"named default", map[string]*AccountConfig{"default": hr(func(*AccountConfig) {})["hr"]}, "accounts.default: the section's own keys"},
		{"no route", map[string]*AccountConfig{"hr/x": hr(func(*AccountConfig) {})["hr"]}, "accounts.hr/x: an account's name is part of its routes (/wechat/oa/NAME)"},
		{"no token", hr(func(a *AccountConfig) { a.Token = "" }), "accounts.hr.token: required"},
		{"empty", map[string]*AccountConfig{"hr": {}}, "accounts.hr.app_id: required"},
		{"null", map[string]*AccountConfig{"hr": nil}, "accounts.hr.app_id: required"},
		{"bad key", hr(func(a *AccountConfig) { a.EncodingAESKey = "short" }), "accounts.hr.encoding_aes_key: not an EncodingAESKey"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := *c
			bad.Accounts = tt.acc
			err := bad.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			for _, secret := range []string{testSecret, testToken, testAESKey, hrSecret, hrToken, hrAESKey} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows %q: %v", secret, err)
				}
			}
		})
	}
	// Accounts alone, without the section's own keys, turn it on.
	only := DefaultConfig()
	only.Accounts = c.Accounts
	if err := only.Validate(); err != nil || !only.Enabled() || !slices.Equal(only.AccountNames(), []string{"hr"}) {
		t.Errorf("accounts alone: %v, enabled %v, names %v", err, only.Enabled(), only.AccountNames())
	}
}

// byAccount hands each message to the gateway of its account.
type byAccount map[string]*gateway

func (g byAccount) Submit(ctx context.Context, m channels.Message) error {
	return g[m.Account].Submit(ctx, m)
}

// TestTwoOfficialAccountsEachAnswerTheirOwn: two Official Accounts, the
// section's own at /wechat/oa and wechat_oa.accounts.hr at /wechat/oa/hr,
// each verify their callbacks with their own token and key and answer
// from their own account, in a conversation of their own. A callback
// signed and sealed for one account, posted to the other's route, is
// refused there and nothing of it is queued. A third account whose
// secret WeChat refuses shows down in parley_account_up while the two
// serve.
func TestTwoOfficialAccountsEachAnswerTheirOwn(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	opsFake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	hrFake := wechattest.NewOfficialAccount(t, hrAppID, hrSecret)
	ops := wechattest.NewPlatform(t, testToken, testAESKey, testAppID)
	hr := wechattest.NewPlatform(t, hrToken, hrAESKey, hrAppID)
	section := DefaultConfig()
	section.AppID, section.AppSecret, section.Token, section.EncodingAESKey, section.BaseURL = testAppID, testSecret, testToken, testAESKey, opsFake.URL()
	goneFake := wechattest.NewOfficialAccount(t, "wx-gone", "rotated-secret")
	section.Accounts = map[string]*AccountConfig{
		"hr":   {AppID: hrAppID, AppSecret: hrSecret, Token: hrToken, EncodingAESKey: hrAESKey, BaseURL: hrFake.URL()},
		"gone": {AppID: "wx-gone", AppSecret: "old-secret", Token: "goneToken", BaseURL: goneFake.URL()},
	}
	if err := section.Validate(); err != nil {
		t.Fatal(err)
	}
	gws := byAccount{"": newGateway(r), "hr": newGateway(r), "gone": newGateway(r)}
	m := metrics.New()
	chs, err := section.OpenAccounts(t.Context(), channels.Deps{Handler: gws, Redis: r.Client, Prefix: r.Prefix, Metrics: m, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 3 {
		t.Fatalf("%d adapters", len(chs))
	}
	mux := http.NewServeMux()
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	for _, ch := range chs {
		a := ch.(*Adapter)
		gws[a.Account()].turnOn = func() *Adapter { return a }
		a.Mount(mux)
		runs.Go(func() { _ = a.Run(ctx, gws) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		for _, gw := range gws {
			gw.turns.Wait()
		}
		cancel()
		runs.Wait()
	})
	waitFor(t, "parley_account_up of each account", func() bool {
		return testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, "default")) == 1 && testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, "hr")) == 1 &&
			testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, "gone")) == 0 && len(goneFake.TokenCalls()) > 0
	})
	routes := map[string]*wechattest.Platform{srv.URL + Path: ops, srv.URL + Path + "/hr": hr}
	for route, p := range routes {
		answer := wechattest.Post(t, route, p.Encrypted(t, inbound("o-alice", "hello "+p.Crypter.ReceiveID(), "7"), true))
		reply, ok := p.Reply(t, answer)
		if !ok || reply.Content != "echo: hello "+p.Crypter.ReceiveID() {
			t.Fatalf("%s: passive reply %+v (%v)", route, reply, ok)
		}
	}
	for account, want := range map[string]string{"": "wechat_oa:" + testAppID + ":o-alice:", "hr": "wechat_oa/hr:" + hrAppID + ":o-alice:"} {
		got := gws[account].messages()
		if len(got) != 1 || got[0].Account != account || got[0].ConversationKey() != want {
			t.Fatalf("account %q got %+v, want one in %s", account, got, want)
		}
	}
	// Signed and sealed for the other account: refused, nothing queued.
	before := rejected(m, "bad_signature")
	for route, p := range map[string]*wechattest.Platform{srv.URL + Path: hr, srv.URL + Path + "/hr": ops} {
		if a := wechattest.Post(t, route, p.Encrypted(t, inbound("o-mallory", "transfer", "8"), true)); a.Status != http.StatusForbidden {
			t.Errorf("%s took the other account's callback: %d %q", route, a.Status, a.Body)
		}
		if a := wechattest.Get(t, route, p.OAURLCheck("echo-x")); a.Status != http.StatusForbidden || strings.Contains(string(a.Body), "echo-x") {
			t.Errorf("%s verified the other account's URL check: %d %q", route, a.Status, a.Body)
		}
	}
	if n := rejected(m, "bad_signature") - before; n < 2 {
		t.Errorf("rejected{bad_signature} rose by %v, want the two callbacks (and URL checks)", n)
	}
	// At an account's route: unsigned, replayed with another body,
	// oversized, or at a route no account has — each refused, none queued.
	signed := hr.Encrypted(t, inbound("o-alice", "again", "9"), true)
	if a := wechattest.Post(t, srv.URL+Path+"/hr", signed); a.Status != http.StatusOK {
		t.Fatalf("hr's own callback: %d", a.Status)
	}
	replayed := signed
	replayed.Body = hr.Encrypted(t, inbound("o-alice", "changed", "10"), true).Body
	unsigned := hr.Encrypted(t, inbound("o-alice", "x", "11"), true)
	unsigned.Query = url.Values{}
	for name, tt := range map[string]struct {
		route string
		req   wechattest.Request
		want  int
	}{
		"replayed":      {Path + "/hr", replayed, http.StatusForbidden},
		"unsigned":      {Path + "/hr", unsigned, http.StatusForbidden},
		"oversized":     {Path + "/hr", wechattest.Request{Query: signed.Query, Body: bytes.Repeat([]byte("x"), wxcrypto.MaxBody+1)}, http.StatusRequestEntityTooLarge},
		"no such route": {Path + "/nope", hr.Encrypted(t, inbound("o-alice", "y", "12"), true), http.StatusNotFound},
	} {
		if a := wechattest.Post(t, srv.URL+tt.route, tt.req); a.Status != tt.want || strings.Contains(string(a.Body), hrAppID) {
			t.Errorf("%s: answered %d %q, want %d", name, a.Status, a.Body, tt.want)
		}
	}
	if n := len(gws["hr"].messages()); n != 2 {
		t.Errorf("hr queued %d messages, want its two own", n)
	}
	if n := len(gws[""].messages()); n != 1 {
		t.Errorf("the default account queued %d messages, want its own one", n)
	}
	if n := len(opsFake.CustomMessages()) + len(hrFake.CustomMessages()); n != 0 {
		t.Errorf("%d customer-service messages besides the passive replies", n)
	}
}

// TestASingleOfficialAccountKeepsItsRouteAndKeys: a section without
// accounts opens one adapter, of the default account, at the plain route,
// whose followers keep the conversation keys they had before accounts.
func TestASingleOfficialAccountKeepsItsRouteAndKeys(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	section := testConfig(fake, testAESKey)
	section.Retry = DefaultConfig().Retry
	gw := newGateway(r)
	chs, err := section.OpenAccounts(t.Context(), channels.Deps{Handler: gw, Redis: r.Client, Prefix: r.Prefix, Metrics: metrics.New(), Log: quietLog()})
	if err != nil || len(chs) != 1 {
		t.Fatalf("%d adapters, %v", len(chs), err)
	}
	a := chs[0].(*Adapter)
	if a.Account() != "" || !slices.Equal(section.AccountNames(), []string{"default"}) {
		t.Fatalf("account %q, names %v", a.Account(), section.AccountNames())
	}
	gw.turnOn = func() *Adapter { return a }
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); gw.turns.Wait() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx, gw) }()
	t.Cleanup(func() { cancel(); <-done })
	p := wechattest.NewPlatform(t, testToken, testAESKey, testAppID)
	if reply, ok := p.Reply(t, wechattest.Post(t, srv.URL+Path, p.Encrypted(t, inbound("o-bob", "hi", "1"), true))); !ok || reply.Content != "echo: hi" {
		t.Fatalf("passive reply %+v (%v)", reply, ok)
	}
	if got := gw.messages(); len(got) != 1 || got[0].ConversationKey() != "wechat_oa:"+testAppID+":o-bob:" || got[0].Account != "" {
		t.Fatalf("messages %+v", got)
	}
}
