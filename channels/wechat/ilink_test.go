package wechat

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

func TestLoginWalksEveryState(t *testing.T) {
	t.Parallel()
	f := wechattest.NewILink(t)
	f.VerifyCode = "4711"
	// First code: waits, is scanned, expires. Second code: asks for the
	// verification code, redirects to another host, and is confirmed.
	f.SetLoginSteps("wait", "scaned", "expired", "wait", "need_verifycode", "scaned_but_redirect", "scaned", "confirmed")
	var out bytes.Buffer
	o := LoginOptions{BaseURL: f.URL(), Out: &out, In: strings.NewReader("4711\n"), PollInterval: time.Millisecond}
	ctx := context.Background()
	a, err := Login(ctx, o)
	if err != nil {
		t.Fatalf("login: %v\n%s", err, out.String())
	}
	if a.BotID != f.BotID || a.Token != f.Token() || a.BaseURL != f.URL() || a.UserID == "" {
		t.Fatalf("account = %+v", a)
	}
	if f.CodesIssued() != 2 {
		t.Errorf("codes issued = %d, want 2 (one expired)", f.CodesIssued())
	}
	if got := f.VerifyCodes(); len(got) != 1 || got[0] != "4711" {
		t.Errorf("verify codes sent = %v", got)
	}
	hosts := f.StatusHosts()
	if last := hosts[len(hosts)-1]; last != f.RedirectHost() {
		t.Errorf("polls after the redirect went to %s, want %s (all: %v)", last, f.RedirectHost(), hosts)
	}
	text := out.String()
	for _, want := range []string{"https://liteapp.weixin.qq.com/q/fake-1", "https://liteapp.weixin.qq.com/q/fake-2", "█", "Scanned", "verification code", "expired"} {
		if !strings.Contains(text, want) {
			t.Errorf("login output lacks %q:\n%s", want, text)
		}
	}

	// Stored in the file store with mode 0600.
	st := NewFileState(t.TempDir())
	if err := st.SaveAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, want 0600", fi.Mode().Perm())
	}
	got, ok, err := st.Account(ctx, a.BotID)
	if err != nil || !ok || got.Token != a.Token || got.Expired {
		t.Fatalf("stored account = %+v %v %v", got, ok, err)
	}
}

func TestLoginGivesUpAfterTooManyExpiredCodes(t *testing.T) {
	t.Parallel()
	f := wechattest.NewILink(t)
	f.SetLoginSteps("expired")
	_, err := Login(context.Background(), LoginOptions{BaseURL: f.URL(), MaxCodes: 3, PollInterval: time.Millisecond, NoQR: true})
	if err != ErrLoginExpired {
		t.Fatalf("err = %v, want ErrLoginExpired", err)
	}
	if f.CodesIssued() != 3 {
		t.Fatalf("codes issued = %d, want 3", f.CodesIssued())
	}
}

func TestILinkReceiveAndSend(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(200)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	cfg := testConfig(r, "A")
	cfg.State = st
	cfg.ChunkChars = 40
	rn := start(t, r, cfg, nil)

	long := strings.Repeat("字", 100) // 100 characters, 300 bytes
	f.Add(
		wechattest.Message{ID: 1, From: "alice@im.wechat", Text: "hello", ContextToken: "ctx-a1"},
		wechattest.Message{ID: 2, From: "alice@im.wechat", Text: "bot echo", Type: 2, ContextToken: "ctx-bot"},
		wechattest.Message{ID: 3, From: "bob@im.wechat", Text: "what's the weather", ItemType: 3, ContextToken: "ctx-b1"},
		wechattest.Message{ID: 4, From: "carol@im.wechat", ItemType: 2, ContextToken: "ctx-c1"},
		wechattest.Message{Raw: `{"message_id": "oops", "item_list": 7}`},
		wechattest.Message{Raw: `{"message_id": 9, "message_type": 1, "item_list": [{"type":1,"text_item":{"text":"no sender"}}]}`},
		wechattest.Message{ID: 5, From: "dave@im.wechat", Text: long, ContextToken: "ctx-d1"},
	)
	waitFor(t, "answers to alice, bob, carol and dave", func() bool {
		return len(sendsTo(f, "alice@im.wechat")) == 1 && len(sendsTo(f, "bob@im.wechat")) == 1 &&
			len(sendsTo(f, "carol@im.wechat")) == 3 && strings.Count(texts(sendsTo(f, "dave@im.wechat")), "字") == 100
	})
	a := sendsTo(f, "alice@im.wechat")[0]
	if a.Text != "echo: hello" || a.ContextToken != "ctx-a1" || a.ClientID == "" {
		t.Errorf("alice got %+v", a)
	}
	if b := sendsTo(f, "bob@im.wechat")[0]; b.Text != "echo: what's the weather" || b.ContextToken != "ctx-b1" {
		t.Errorf("voice transcript: bob got %+v", b)
	}
	// The note, sent like any answer, in chunks of 40 characters here.
	if c := sendsTo(f, "carol@im.wechat"); texts(c) != "Sorry, I can only read text, voice, | images and files for now. Please send | text." || c[0].ContextToken != "ctx-c1" {
		t.Errorf("image: carol got %+v", c)
	}
	// The note is the gateway's to send (after its access rules): the
	// adapter handed the image over rather than answering it.
	for _, m := range rn.gw.messages() {
		if (m.User == "carol@im.wechat") != (m.Unsupported == unsupportedNote) || m.User == "carol@im.wechat" && m.Text != "" {
			t.Errorf("handed over %+v", m)
		}
	}
	d := sendsTo(f, "dave@im.wechat")
	ids := map[string]bool{}
	var joined string
	for _, s := range d {
		if n := utf8.RuneCountInString(s.Text); n > 40 {
			t.Errorf("a chunk of %d characters; want at most 40", n)
		}
		ids[s.ClientID] = true
		joined += s.Text
	}
	if len(ids) != len(d) {
		t.Errorf("client_id reused across chunks: %v", ids)
	}
	if strings.ReplaceAll(joined, " ", "") != "echo:"+long {
		t.Errorf("chunks do not add up to the answer: %q", joined)
	}
	for _, m := range rn.gw.messages() {
		if m.Text == "bot echo" {
			t.Error("a bot-sent message (message_type 2) reached the gateway")
		}
		if m.Channel != "wechat" || m.Workspace != f.BotID || m.Thread != "" || !m.DM || m.Meta["via"] != ViaILink || !strings.HasPrefix(m.ID, "ilink:") {
			t.Errorf("message = %+v", m)
		}
	}
	if len(rn.gw.messages()) != 4 {
		t.Errorf("gateway got %d messages, want 4 (alice, bob, carol's image, dave)", len(rn.gw.messages()))
	}
	if n := counter(t, cfg.Metrics, "rejected", "wechat", "bad_frame"); n != 1 {
		t.Errorf("bad_frame rejections = %v, want 1", n)
	}
	if n := counter(t, cfg.Metrics, "rejected", "wechat", "missing_fields"); n != 1 {
		t.Errorf("missing_fields rejections = %v, want 1", n)
	}
	// The cursor is persisted past the batch.
	waitFor(t, "the cursor to be saved", func() bool {
		c, _ := st.Cursor(context.Background(), f.BotID)
		return c == "c7"
	})
	// Every bot call carries the protocol headers.
	for _, h := range f.Headers() {
		uin, err := base64.StdEncoding.DecodeString(h.Get("X-WECHAT-UIN"))
		if _, perr := strconv.ParseUint(string(uin), 10, 32); err != nil || perr != nil {
			t.Fatalf("X-WECHAT-UIN = %q is not base64 of a decimal uint32", h.Get("X-WECHAT-UIN"))
		}
		if h.Get("iLink-App-Id") != "bot" || h.Get("iLink-App-ClientVersion") != "65536" || h.Get("Content-Type") != "application/json" {
			t.Fatalf("headers = %v", h)
		}
	}
	// A typing indicator ran and was cancelled.
	var on, off bool
	for _, ty := range f.Typings() {
		on = on || ty.Status == 1
		off = off || ty.Status == 2
	}
	if !on || !off {
		t.Errorf("typing calls = %+v; want a start and a cancel", f.Typings())
	}
	if at, ok, err := NewestContextToken(context.Background(), r.Client, r.Prefix, f.BotID); err != nil || !ok || time.Since(at) > time.Minute {
		t.Errorf("newest context token = %v %v %v", at, ok, err)
	}
}

func TestILinkSessionExpiredPausesAndResumesAfterLogin(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(100)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	cfg := testConfig(r, "A")
	cfg.State = st
	rn := start(t, r, cfg, nil)
	waitFor(t, "polling", func() bool { return len(f.Polls()) > 0 })
	if err := rn.ch.Ready(); err != nil {
		t.Fatalf("Ready before the expiry: %v", err)
	}

	f.Expire()
	// The expiry is recorded in the state store first, then reported by
	// Ready (whoever sees the replica degraded finds the state saying
	// why): wait for Ready, then the store must already say so.
	waitFor(t, "Ready to report the expiry, telling the operator to log in", func() bool {
		err := rn.ch.Ready()
		return err != nil && strings.Contains(err.Error(), "parley wechat login")
	})
	if a, _, err := st.Account(context.Background(), f.BotID); err != nil || !a.Expired {
		t.Fatalf("Ready reports the expiry but the state store holds %+v, %v", a, err)
	}
	if n := counter(t, cfg.Metrics, "api", "wechat", "-14"); n < 1 {
		t.Errorf("api errors -14 = %v", n)
	}
	// Polling pauses.
	time.Sleep(300 * time.Millisecond)
	before := len(f.Polls())
	time.Sleep(500 * time.Millisecond)
	if after := len(f.Polls()); after != before {
		t.Fatalf("still polling after -14: %d → %d polls", before, after)
	}

	// A new login (new token) resumes polling and clears the degradation.
	f.SetToken("tok-relogin")
	f.SetLoginSteps("confirmed") // a confirmed login also ends the fake's expiry
	acct, err := Login(context.Background(), LoginOptions{BaseURL: f.URL(), PollInterval: time.Millisecond, NoQR: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveAccount(context.Background(), acct); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "polling to resume", func() bool { return len(f.Polls()) > before && rn.ch.Ready() == nil })
	f.Add(wechattest.Message{ID: 77, From: "erin@im.wechat", Text: "back?", ContextToken: "ctx-e"})
	waitFor(t, "an answer after the re-login", func() bool { return len(sendsTo(f, "erin@im.wechat")) == 1 })
}

// slowExpiry is a State whose MarkExpired waits for release: the window
// between iLink's -14 and the expiry reaching the state store.
type slowExpiry struct {
	State
	entered chan struct{}
	release chan struct{}
}

func (s slowExpiry) MarkExpired(ctx context.Context, bot, token string) error {
	close(s.entered)
	<-s.release
	return s.State.MarkExpired(ctx, bot, token)
}

// /readyz (Ready) degrades only once the expiry is recorded, so that an
// operator (or a test) who sees it and runs `parley wechat status` reads
// EXPIRED there, never "active".
func TestILinkReadyDegradesOnlyAfterTheExpiryIsRecorded(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(100)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	slow := slowExpiry{State: st, entered: make(chan struct{}), release: make(chan struct{})}
	cfg := testConfig(r, "A")
	cfg.State = slow
	rn := start(t, r, cfg, nil)
	waitFor(t, "polling", func() bool { return len(f.Polls()) > 0 })

	f.Expire()
	select {
	case <-slow.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the -14 was never recorded")
	}
	if err := rn.ch.Ready(); err != nil {
		close(slow.release)
		t.Fatalf("Ready degraded before the expiry was recorded: %v", err)
	}
	close(slow.release)
	waitFor(t, "Ready to degrade", func() bool { return rn.ch.Ready() != nil })
	if a, ok, err := st.Account(context.Background(), f.BotID); err != nil || !ok || !a.Expired {
		t.Fatalf("Ready degraded but the stored account is %+v (found %v, %v); want expired", a, ok, err)
	}
}

func TestILinkRestartMidBatchRedeliversWithoutASecondAnswer(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(100)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	f.Add(
		wechattest.Message{ID: 1, From: "u1", Text: "first", ContextToken: "t1"},
		wechattest.Message{ID: 2, From: "u2", Text: "second", ContextToken: "t2"},
	)
	// Replica A accepts and answers "first", then dies while handing
	// over "second": the cursor is not saved.
	cfgA := testConfig(r, "A")
	cfgA.State = st
	a := start(t, r, cfgA, func(m channels.Message) bool { return m.Text == "second" })
	waitFor(t, "the first answer", func() bool { return len(sendsTo(f, "u1")) == 1 })
	a.stop()
	if c, _ := st.Cursor(context.Background(), f.BotID); c != "" {
		t.Fatalf("cursor saved before the batch was handed over: %q", c)
	}
	if len(sendsTo(f, "u2")) != 0 {
		t.Fatal("second message answered before the restart")
	}

	// Replica B polls the same batch again: "first" is a duplicate.
	cfgB := testConfig(r, "B")
	cfgB.State = st
	b := start(t, r, cfgB, nil)
	waitFor(t, "the second answer", func() bool { return len(sendsTo(f, "u2")) == 1 })
	waitFor(t, "the cursor to be saved", func() bool {
		c, _ := st.Cursor(context.Background(), f.BotID)
		return c == "c2"
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(sendsTo(f, "u1")); n != 1 {
		t.Fatalf("first message answered %d times, want 1: %s", n, texts(sendsTo(f, "u1")))
	}
	if n := len(sendsTo(f, "u2")); n != 1 {
		t.Fatalf("second message answered %d times", n)
	}
	if len(b.gw.messages()) != 1 || b.gw.messages()[0].Text != "second" {
		t.Fatalf("replica B accepted %+v", b.gw.messages())
	}
	var redelivered bool
	for _, p := range f.Polls() {
		redelivered = redelivered || (p.Replica == "B" && p.Cursor == "")
	}
	if !redelivered {
		t.Fatalf("replica B never polled from the old cursor: %+v", f.Polls())
	}
}

func TestILinkOnlyOneReplicaPollsAndAnotherTakesOver(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(200)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	cfgA, cfgB := testConfig(r, "A"), testConfig(r, "B")
	cfgA.State, cfgB.State = st, st
	a := start(t, r, cfgA, nil)
	waitFor(t, "A to poll", func() bool { return len(f.Polls()) > 0 })
	b := start(t, r, cfgB, nil)
	time.Sleep(1500 * time.Millisecond) // more than a lease TTL
	replicas := map[string]int{}
	for _, p := range f.Polls() {
		replicas[p.Replica]++
	}
	if len(replicas) != 1 || replicas["A"] == 0 {
		t.Fatalf("polls by replica = %v; want only A", replicas)
	}
	if f.MaxConcurrentPolls() != 1 {
		t.Fatalf("%d polls were open at once", f.MaxConcurrentPolls())
	}
	f.Add(wechattest.Message{ID: 1, From: "u", Text: "one", ContextToken: "t"})
	waitFor(t, "an answer", func() bool { return len(sendsTo(f, "u")) == 1 })

	a.stop()
	n := len(f.Polls())
	waitFor(t, "B to take over", func() bool {
		for _, p := range f.Polls()[n:] {
			if p.Replica == "B" {
				return true
			}
		}
		return false
	})
	f.Add(wechattest.Message{ID: 2, From: "u", Text: "two", ContextToken: "t2"})
	waitFor(t, "B's answer", func() bool { return len(sendsTo(f, "u")) == 2 })
	if got := b.gw.messages(); len(got) != 1 || got[0].Text != "two" {
		t.Fatalf("B accepted %+v", got)
	}
	if s := sendsTo(f, "u")[1]; s.ContextToken != "t2" || s.Text != "echo: two" {
		t.Fatalf("B sent %+v", s)
	}
}

func TestILinkSendRetriesOnceOnAStaleToken(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	cfg := testConfig(r, "A")
	cfg.State = st
	ch, err := cfg.new()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	side := ch.ilink
	if err := side.tokens.record(ctx, f.BotID, "u", "old"); err != nil {
		t.Fatal(err)
	}
	m := channels.Message{Channel: Name, Workspace: f.BotID, Chat: "u", Meta: map[string]string{"via": ViaILink}}

	// ret -2 once: retried with a new client_id, then delivered.
	f.ScriptSendRet(-2)
	if err := ch.Send(ctx, m, channels.Reply{Text: "hi"}); err != nil {
		t.Fatalf("send after one stale answer: %v", err)
	}
	s := f.Sends()
	if len(s) != 2 || s[0].ClientID == s[1].ClientID || s[1].Ret != 0 || s[1].ContextToken != "old" {
		t.Fatalf("sends = %+v", s)
	}
	// ret -2 twice: one retry only, the error is returned and counted.
	f.ScriptSendRet(-2, -2)
	if err := ch.Send(ctx, m, channels.Reply{Text: "hi"}); err == nil {
		t.Fatal("send with a token stale twice succeeded")
	}
	if len(f.Sends()) != 4 {
		t.Fatalf("%d sends; want one retry only", len(f.Sends()))
	}
	// Another non-zero ret is not retried, but never silent.
	f.ScriptSendRet(-5)
	if err := ch.Send(ctx, m, channels.Reply{Text: "hi"}); err == nil || !strings.Contains(err.Error(), "ret -5") {
		t.Fatalf("err = %v", err)
	}
	if len(f.Sends()) != 5 {
		t.Fatalf("%d sends", len(f.Sends()))
	}
	if n := counter(t, cfg.Metrics, "api", "wechat", "-2"); n != 3 {
		t.Errorf("api errors -2 = %v, want 3", n)
	}
	if n := counter(t, cfg.Metrics, "api", "wechat", "-5"); n != 1 {
		t.Errorf("api errors -5 = %v, want 1", n)
	}
}

func TestSplitCharsCountsCharactersNotBytes(t *testing.T) {
	t.Parallel()
	cjk := strings.Repeat("这是一个很长的中文句子。", 100) // 1200 characters
	chunks := splitChars(cjk, 600)
	if len(chunks) < 2 || len(chunks) > 3 {
		t.Fatalf("%d chunks for 1200 characters at 600", len(chunks))
	}
	for _, c := range chunks {
		if n := utf8.RuneCountInString(c); n > 600 || n < 300 {
			t.Errorf("chunk of %d characters", n)
		}
	}
	ascii := strings.Repeat("word ", 200) // 1000 characters
	for _, c := range splitChars(ascii, 600) {
		if n := utf8.RuneCountInString(c); n > 600 {
			t.Errorf("ascii chunk of %d characters", n)
		}
	}
	if got := channels.PlainText("## Title\n**bold** and [link](https://x.y/z)"); got != "Title\nbold and link (https://x.y/z)" {
		t.Errorf("plainText = %q", got)
	}
	if got := stripMention("@Parley  /skill list"); got != "/skill list" {
		t.Errorf("stripMention = %q", got)
	}
}

func TestStateStoresExpiryPerToken(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	home := t.TempDir()
	for name, st := range map[string]State{"redis": NewRedisState(r.Client, r.Prefix), "file": NewFileState(home)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := st.SaveAccount(ctx, Account{BotID: "b", Token: "t1", BaseURL: "https://x"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SaveCursor(ctx, "b", "c9"); err != nil {
				t.Fatal(err)
			}
			if err := st.MarkExpired(ctx, "b", "t1"); err != nil {
				t.Fatal(err)
			}
			if a, ok, _ := st.Account(ctx, "b"); !ok || !a.Expired || a.Session() != "expired" {
				t.Fatalf("after MarkExpired: %+v %v", a, ok)
			}
			// A new login (another token) is active again; the cursor stays.
			if err := st.SaveAccount(ctx, Account{BotID: "b", Token: "t2"}); err != nil {
				t.Fatal(err)
			}
			all, err := st.Accounts(ctx)
			if err != nil || len(all) != 1 || all[0].Expired || all[0].Token != "t2" {
				t.Fatalf("after a new login: %+v %v", all, err)
			}
			if c, _ := st.Cursor(ctx, "b"); c != "c9" {
				t.Fatalf("cursor = %q", c)
			}
		})
	}
	for _, f := range []string{StateFileName, CursorFileName} {
		fi, err := os.Stat(filepath.Join(home, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
}

// An iLink message with a group_id is the group's: its own conversation
// (Chat is the group), not a DM of its sender, answered in the group with
// the group's context token; the sender's own DM keeps its token.
func TestAccessILinkGroupMessagesAreGroups(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := wechattest.NewILink(t)
	f.SetLongPoll(200)
	st := NewRedisState(r.Client, r.Prefix)
	loggedIn(t, st, f)
	cfg := testConfig(r, "A")
	cfg.State = st
	rn := start(t, r, cfg, nil)

	f.Add(
		wechattest.Message{ID: 1, From: "alice@im.wechat", GroupID: "team@chatroom", Text: "hello group", ContextToken: "ctx-g1"},
		wechattest.Message{ID: 2, From: "alice@im.wechat", Text: "hello me", ContextToken: "ctx-a1"},
	)
	waitFor(t, "both answers", func() bool {
		return len(sendsTo(f, "team@chatroom")) == 1 && len(sendsTo(f, "alice@im.wechat")) == 1
	})
	if g := sendsTo(f, "team@chatroom")[0]; g.Text != "echo: hello group" || g.ContextToken != "ctx-g1" {
		t.Errorf("group answer = %+v", g)
	}
	if d := sendsTo(f, "alice@im.wechat")[0]; d.Text != "echo: hello me" || d.ContextToken != "ctx-a1" {
		t.Errorf("DM answer = %+v", d)
	}
	msgs := rn.gw.messages()
	if len(msgs) != 2 {
		t.Fatalf("gateway got %+v", msgs)
	}
	if g := msgs[0]; g.Chat != "team@chatroom" || g.User != "alice@im.wechat" || g.DM || g.ConversationKey() == msgs[1].ConversationKey() {
		t.Errorf("group message = %+v", g)
	}
	if d := msgs[1]; d.Chat != "alice@im.wechat" || !d.DM {
		t.Errorf("DM = %+v", d)
	}
}
