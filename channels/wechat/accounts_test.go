package wechat

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/retry"
)

// TestWeChatAccountsConfig: wechat.accounts.NAME holds one app's keys
// beside the section's own (the account named default), takes what it
// leaves out from the section, and is refused with its key when it is
// the same WeCom bot as another account or cannot be named so.
func TestWeChatAccountsConfig(t *testing.T) {
	c := DefaultConfig()
	c.WeComBotID, c.WeComSecret, c.ChunkChars = "bot_ops", "s1", 300
	c.WeComWSURL = "wss://wecom.example"
	c.Accounts = map[string]*AccountConfig{"hr": {WeComBotID: "bot_hr", WeComSecret: "s2"}, "family": nil}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.AccountNames(); !slices.Equal(got, []string{"default", "family", "hr"}) {
		t.Errorf("accounts = %v", got)
	}
	if hr := c.accounts()["hr"]; hr.WeComBotID != "bot_hr" || hr.WeComWSURL != "wss://wecom.example" || hr.ChunkChars != 300 || hr.Accounts != nil {
		t.Errorf("hr = %+v", hr)
	}
	if fam, ok := c.accounts()["family"]; !ok || fam.wecomEnabled() || fam.ILinkBaseURL != DefaultILinkBaseURL {
		t.Errorf("an account of iLink bots alone = %+v", fam)
	}
	for _, tt := range []struct {
		name string
		acc  map[string]*AccountConfig
		want string
	}{
		{"same bot id", map[string]*AccountConfig{"hr": {WeComBotID: "bot_ops", WeComSecret: "s2"}}, "accounts.hr.wecom_bot_id: the same wecom_bot_id as account default"},
		{"same secret", map[string]*AccountConfig{"hr": {WeComBotID: "bot_hr", WeComSecret: "s1"}}, "accounts.hr.wecom_bot_secret: the same wecom_bot_secret as account default"},
		{"named default", map[string]*AccountConfig{"default": {WeComBotID: "bot_hr", WeComSecret: "s2"}}, "accounts.default: the section's own keys"},
		{"no route", map[string]*AccountConfig{"HR Bot": {WeComBotID: "bot_hr", WeComSecret: "s2"}}, "accounts.HR Bot: an account's name is part of"},
		{"no secret", map[string]*AccountConfig{"hr": {WeComBotID: "bot_hr"}}, "accounts.hr.wecom_bot_id: set both"},
		{"bad chunk", map[string]*AccountConfig{"hr": {ChunkChars: -1}}, "accounts.hr.chunk_chars: must be greater than 0"},
		{"unset env", map[string]*AccountConfig{"hr": {WeComBotID: "bot_hr", WeComSecret: "${HR_WECOM_SECRET}"}}, "accounts.hr.wecom_bot_secret: the environment variable HR_WECOM_SECRET is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := *c
			bad.Accounts = tt.acc
			err := bad.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			for _, secret := range []string{"s1", "s2"} {
				if strings.Contains(err.Error(), " "+secret) {
					t.Errorf("error shows %q: %v", secret, err)
				}
			}
		})
	}
}

// accountsGateway stands in for the gateway of several adapters: it
// de-duplicates on the conversation key and the message id, as the
// gateway does, and answers "echo: <text>" through the adapter of the
// message's account.
type accountsGateway struct {
	r        *redistest.Redis
	adapters map[string]*Adapter // by account ("" for the default)

	mu  sync.Mutex
	got []channels.Message
}

func (g *accountsGateway) Submit(ctx context.Context, m channels.Message) error {
	first, err := g.r.Client.SetNX(ctx, g.r.Prefix+"seen:"+m.ConversationKey()+":"+m.ID, 1, time.Hour).Result()
	if err != nil || !first {
		return err
	}
	g.mu.Lock()
	g.got = append(g.got, m)
	g.mu.Unlock()
	return g.adapters[m.Account].Send(ctx, m, channels.Reply{Text: "echo: " + m.Text})
}

func (g *accountsGateway) messages() []channels.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

// openAccounts opens every account of section as parley serve does and
// runs the adapters until the test ends.
func openAccounts(t *testing.T, r *redistest.Redis, section *Config, m *metrics.Metrics) *accountsGateway {
	t.Helper()
	if err := section.Validate(); err != nil {
		t.Fatal(err)
	}
	chs, err := section.OpenAccounts(t.Context(), channels.Deps{Redis: r.Client, Shared: true, Prefix: r.Prefix, Home: t.TempDir(), Metrics: m, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	gw := &accountsGateway{r: r, adapters: map[string]*Adapter{}}
	for _, ch := range chs {
		a := ch.(*Adapter)
		gw.adapters[a.Account()] = a
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, a := range gw.adapters {
		wg.Go(func() { _ = a.Run(ctx, gw) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return gw
}

// answered is the finished answer on reqID, or "".
func answered(f *wechattest.WeCom, reqID string) string {
	fr := respondFrames(f, reqID)
	if len(fr) == 0 || !fr[len(fr)-1].Stream().Finish {
		return ""
	}
	return fr[len(fr)-1].Stream().Content
}

func accountUp(m *metrics.Metrics, account string) float64 {
	return testutil.ToFloat64(m.AccountUp.WithLabelValues(Name, account))
}

// TestTwoWeComBotsEachAnswerTheirOwn: two WeCom AI bots on one WeCom
// address, the section's own and wechat.accounts.hr, each hold their own
// long connection; each answers only what its own bot received, in a
// conversation of its own (the account in the key), from its own bot. A
// third account whose subscription WeCom refuses is down — Ready names
// it, parley_account_up is 0 — while the other two keep answering.
func TestTwoWeComBotsEachAnswerTheirOwn(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ops := wechattest.NewWeCom(t, "bot_ops", "s-ops")
	hr := wechattest.NewWeCom(t, "bot_hr", "s-hr")
	revoked := wechattest.NewWeCom(t, "bot_gone", "s-new")
	host := wechattest.NewWeComHost(t, ops, hr, revoked)
	section := DefaultConfig()
	section.WeComBotID, section.WeComSecret, section.WeComWSURL = ops.BotID, config.Secret(ops.Secret), host.URL()
	section.Retry = retry.Config{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	section.Accounts = map[string]*AccountConfig{
		"hr":   {WeComBotID: hr.BotID, WeComSecret: config.Secret(hr.Secret)},
		"gone": {WeComBotID: revoked.BotID, WeComSecret: "s-old"},
	}
	m := metrics.New()
	gw := openAccounts(t, r, section, m)
	if len(gw.adapters) != 3 {
		t.Fatalf("%d adapters, want 3", len(gw.adapters))
	}
	waitFor(t, "both connections and the refusal", func() bool {
		return gw.adapters[""].wecom.current() != nil && gw.adapters["hr"].wecom.current() != nil && gw.adapters["gone"].Ready() != nil
	})
	if err := gw.adapters["gone"].Ready(); !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "wechat.accounts.gone.wecom_bot_id") || strings.Contains(err.Error(), "s-old") {
		t.Errorf("the refused account's Ready: %v", err)
	}
	for account, want := range map[string]float64{"default": 1, "hr": 1, "gone": 0} {
		if v := accountUp(m, account); v != want {
			t.Errorf("parley_account_up{account=%q} = %v, want %v", account, v, want)
		}
	}
	for _, a := range []string{"", "hr"} {
		if err := gw.adapters[a].Ready(); err != nil {
			t.Errorf("account %q not ready beside the refused one: %v", a, err)
		}
	}
	// The same user writes to both bots; WeCom numbers each bot's
	// messages on its own, so the ids may even be alike.
	if err := ops.SendCallback(wechattest.Callback{ReqID: "req-ops", MsgID: "m1", User: "alice", Text: "deploy?"}); err != nil {
		t.Fatal(err)
	}
	if err := hr.SendCallback(wechattest.Callback{ReqID: "req-hr", MsgID: "m1", User: "alice", Text: "holidays?"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both answers", func() bool { return answered(ops, "req-ops") != "" && answered(hr, "req-hr") != "" })
	if got := answered(ops, "req-ops"); got != "echo: deploy?" {
		t.Errorf("ops answered %q", got)
	}
	if got := answered(hr, "req-hr"); got != "echo: holidays?" {
		t.Errorf("hr answered %q", got)
	}
	if n := len(respondFrames(ops, "req-hr")) + len(respondFrames(hr, "req-ops")); n != 0 {
		t.Errorf("%d frames answered the other bot's message", n)
	}
	keys := map[string]string{}
	for _, msg := range gw.messages() {
		keys[msg.Account] = msg.ConversationKey()
	}
	want := map[string]string{"": "wechat:bot_ops:alice:", "hr": "wechat/hr:bot_hr:alice:"}
	if len(keys) != 2 || keys[""] != want[""] || keys["hr"] != want["hr"] {
		t.Errorf("conversation keys %v, want %v", keys, want)
	}
	// Each account's lease under its own keys; the default's where it was
	// before accounts.
	for _, key := range []string{r.Prefix + "wechat:lease:{wecom:bot_ops}", r.Prefix + "account:hr:wechat:lease:{wecom:bot_hr}"} {
		if n, err := r.Client.Exists(t.Context(), key).Result(); err != nil || n != 1 {
			t.Errorf("lease %s: %d %v", key, n, err)
		}
	}
}

// TestASingleWeChatSectionKeepsItsKeys: a section without accounts opens
// one adapter, of the default account, whose messages keep the
// conversation keys, leases and login state they had before accounts.
func TestASingleWeChatSectionKeepsItsKeys(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-1", "s3cret")
	il := wechattest.NewILink(t)
	loggedIn(t, NewRedisState(r.Client, r.Prefix), il)
	section := DefaultConfig()
	section.WeComBotID, section.WeComSecret, section.WeComWSURL = f.BotID, config.Secret(f.Secret), f.URL()
	section.Retry = retry.Config{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	m := metrics.New()
	gw := openAccounts(t, r, section, m)
	if len(gw.adapters) != 1 || gw.adapters[""] == nil || gw.adapters[""].ilink == nil {
		t.Fatalf("adapters %v, want the default's with iLink", gw.adapters)
	}
	waitFor(t, "the subscription", func() bool { return gw.adapters[""].wecom.current() != nil })
	if err := f.SendCallback(wechattest.Callback{ReqID: "req-1", MsgID: "m1", User: "zhangsan", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	il.Add(wechattest.Message{ID: 1, From: "wxid_bob", Text: "hello", ContextToken: "ctx-b"})
	waitFor(t, "both messages", func() bool { return len(gw.messages()) == 2 })
	var keys []string
	for _, msg := range gw.messages() {
		if msg.Account != "" {
			t.Errorf("message of account %q", msg.Account)
		}
		keys = append(keys, msg.ConversationKey())
	}
	slices.Sort(keys)
	if want := []string{"wechat:aibot-1:zhangsan:", "wechat:" + il.BotID + ":wxid_bob:"}; !slices.Equal(keys, want) {
		t.Errorf("conversation keys %v, want %v", keys, want)
	}
	if v := testutil.ToFloat64(m.ChannelConnected.WithLabelValues(Name)); v != 1 {
		t.Errorf("parley_channel_connected = %v", v)
	}
	for _, key := range []string{r.Prefix + "wechat:lease:{wecom:aibot-1}", r.Prefix + "wechat:lease:{ilink:" + il.BotID + "}"} {
		if n, err := r.Client.Exists(t.Context(), key).Result(); err != nil || n != 1 {
			t.Errorf("lease %s: %d %v", key, n, err)
		}
	}
}

// TestAnAccountsILinkLoginsAreItsOwn: an account's iLink logins live under
// its own keys (or files), so the default account does not poll them; an
// account the file names watches for them from the start, and its
// messages carry the account.
func TestAnAccountsILinkLoginsAreItsOwn(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	il := wechattest.NewILink(t)
	home := t.TempDir()
	if NewAccountFileState(home, "family").Path() == NewAccountFileState(home, "").Path() {
		t.Error("an account's login file is the default's")
	}
	section := DefaultConfig()
	section.Retry = retry.Config{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	section.Accounts = map[string]*AccountConfig{"family": {}}
	m := metrics.New()
	gw := openAccounts(t, r, section, m)
	if len(gw.adapters) != 1 || gw.adapters["family"] == nil {
		t.Fatalf("adapters %v, want the family account's alone (the default has no login)", gw.adapters)
	}
	// Logged in while it runs: the account picks the login up.
	deps := channels.Deps{Redis: r.Client, Shared: true, Prefix: r.Prefix}
	loggedIn(t, openState(deps, "family"), il)
	if got, _ := openState(deps, "").Accounts(t.Context()); len(got) != 0 {
		t.Fatalf("the default account sees the family account's login: %v", got)
	}
	il.Add(wechattest.Message{ID: 2, From: "wxid_mum", Text: "dinner?", ContextToken: "ctx-m"})
	waitFor(t, "the message", func() bool { return len(gw.messages()) == 1 })
	if k := gw.messages()[0].ConversationKey(); k != "wechat/family:"+il.BotID+":wxid_mum:" {
		t.Errorf("conversation key %q", k)
	}
	waitFor(t, "the answer", func() bool { return len(sendsTo(il, "wxid_mum")) == 1 })
	if n, err := r.Client.Exists(t.Context(), r.Prefix+"account:family:wechat:lease:{ilink:"+il.BotID+"}").Result(); err != nil || n != 1 {
		t.Errorf("the family account's lease: %d %v", n, err)
	}
	if v := accountUp(m, "family"); v != 1 {
		t.Errorf("parley_account_up{account=family} = %v while polling", v)
	}
	// Its session ends: the account is down, and Ready says how to log
	// that account's bot in again.
	il.Expire()
	waitFor(t, "the expiry", func() bool { return gw.adapters["family"].Ready() != nil && accountUp(m, "family") == 0 })
	if err := gw.adapters["family"].Ready(); !strings.Contains(err.Error(), "parley wechat login --account family") {
		t.Errorf("Ready = %v", err)
	}
}

// TestWeComAccountsOnTwoReplicas: two replicas of one deployment hold each
// account's WeCom connection once between them (each account's lease is
// its own), both show every account up (one holds it, the other answers
// through it), and a message to the hr bot is answered once.
func TestWeComAccountsOnTwoReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ops := wechattest.NewWeCom(t, "bot_ops", "s-ops")
	hr := wechattest.NewWeCom(t, "bot_hr", "s-hr")
	host := wechattest.NewWeComHost(t, ops, hr)
	section := DefaultConfig()
	section.WeComBotID, section.WeComSecret, section.WeComWSURL = ops.BotID, config.Secret(ops.Secret), host.URL()
	section.Retry = retry.Config{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	section.Accounts = map[string]*AccountConfig{"hr": {WeComBotID: hr.BotID, WeComSecret: config.Secret(hr.Secret)}}
	ma, mb := metrics.New(), metrics.New()
	a, b := openAccounts(t, r, section, ma), openAccounts(t, r, section, mb)
	waitFor(t, "every account up on both replicas", func() bool {
		for _, m := range []*metrics.Metrics{ma, mb} {
			if accountUp(m, "default") != 1 || accountUp(m, "hr") != 1 {
				return false
			}
		}
		return true
	})
	for _, f := range []*wechattest.WeCom{ops, hr} {
		if f.Subscribes() != 1 || f.MaxLive() != 1 {
			t.Errorf("%s: %d subscriptions, %d live at once; want one connection between the replicas", f.BotID, f.Subscribes(), f.MaxLive())
		}
	}
	if err := hr.SendCallback(wechattest.Callback{ReqID: "req-hr", MsgID: "m1", User: "alice", Text: "holidays?"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer", func() bool { return answered(hr, "req-hr") != "" })
	if got := answered(hr, "req-hr"); got != "echo: holidays?" {
		t.Errorf("hr answered %q", got)
	}
	if n := len(a.messages()) + len(b.messages()); n != 1 {
		t.Errorf("the replicas accepted %d messages, want 1", n)
	}
}

// TestARefusedWeComAccountIsDownOnEveryReplica: WeCom refuses one
// account's subscription on the replica holding its lease; the other
// replica, which never dials it, shows that account down too (Ready,
// parley_account_up), from the holder's record in Redis, while the
// default account is up on both.
func TestARefusedWeComAccountIsDownOnEveryReplica(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ops := wechattest.NewWeCom(t, "bot_ops", "s-ops")
	revoked := wechattest.NewWeCom(t, "bot_gone", "s-new")
	host := wechattest.NewWeComHost(t, ops, revoked)
	section := DefaultConfig()
	section.WeComBotID, section.WeComSecret, section.WeComWSURL = ops.BotID, config.Secret(ops.Secret), host.URL()
	section.Retry = retry.Config{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	section.Accounts = map[string]*AccountConfig{"gone": {WeComBotID: revoked.BotID, WeComSecret: "s-old"}}
	ma, mb := metrics.New(), metrics.New()
	a, b := openAccounts(t, r, section, ma), openAccounts(t, r, section, mb)
	waitFor(t, "the refused account down on both replicas", func() bool {
		for _, m := range []*metrics.Metrics{ma, mb} {
			if accountUp(m, "default") != 1 || accountUp(m, "gone") != 0 {
				return false
			}
		}
		return a.adapters["gone"].Ready() != nil && b.adapters["gone"].Ready() != nil
	})
	for _, gw := range []*accountsGateway{a, b} {
		if err := gw.adapters["gone"].Ready(); !strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "s-old") {
			t.Errorf("Ready = %v", err)
		}
	}
}
