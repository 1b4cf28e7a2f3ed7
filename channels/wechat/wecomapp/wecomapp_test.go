package wecomapp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/redistest"
)

// The official WXBizMsgCrypt sample as a WeCom app: the URL check answers
// the sample's plaintext, and the sample's message reaches the gateway and
// is answered through message/send.
func TestOfficialVectorThroughTheCallback(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, "wx5823bf96d3bd56c7", testSecret, 218)
	app := testApp(fake)
	app.Token, app.EncodingAESKey = "QDG6eK", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	opts := testOptions(r, "a")
	var now time.Time
	opts.Now = func() time.Time { return now }
	rp := startReplica(t, r, Config{Apps: []App{app}}, opts)

	now = time.Unix(1409659589, 0)
	get := wechattest.Get(t, rp.url(), url.Values{
		"msg_signature": {"5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"}, "timestamp": {"1409659589"}, "nonce": {"263014780"},
		"echostr": {"P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="},
	})
	if get.Status != http.StatusOK || string(get.Body) != "1616140317555161061" {
		t.Fatalf("URL check answered %d %q", get.Status, get.Body)
	}

	now = time.Unix(1409659813, 0)
	post := wechattest.Post(t, rp.url(), wechattest.Request{
		Query: url.Values{"msg_signature": {"477715d11cdb4164915debcba66cb864d751f3e6"}, "timestamp": {"1409659813"}, "nonce": {"1372623149"}},
		Body:  []byte("<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><Encrypt><![CDATA[RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==]]></Encrypt><AgentID><![CDATA[218]]></AgentID></xml>"),
	})
	if post.Status != http.StatusOK || len(post.Body) != 0 {
		t.Fatalf("callback answered %d %q; want an empty 200 (the empty passive reply)", post.Status, post.Body)
	}
	waitFor(t, "the answer", func() bool { return len(fake.Messages()) == 1 })
	got := rp.gw.messages()
	if len(got) != 1 || got[0].Text != "hello" || got[0].Chat != "mycreate" || got[0].Workspace != testAppName || got[0].ID != testAppName+":4561255354251345929" {
		t.Fatalf("gateway got %+v", got)
	}
	if m := fake.Messages()[0]; m.ToUser != "mycreate" || m.AgentID != 218 || m.MsgType != "markdown" || m.Content() != "echo: hello" {
		t.Fatalf("answer = %s", m.Encode())
	}
}

// A forged signature, a stale timestamp, a wrong receive id and a corrupt
// ciphertext are each refused with the very same answer; nothing reaches
// the gateway, and only the metric tells them apart.
func TestRefusalsAreUniform(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	rp := startReplica(t, r, Config{Apps: []App{testApp(fake)}}, testOptions(r, "a"))
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	stranger := wechattest.NewPlatform(t, testToken, testAESKey, "ww-another-corp")
	in := wechattest.Inbound{To: testCorp, From: "zhangsan", Content: "hi", MsgID: "1", AgentID: strconv.Itoa(testAgent)}

	forged := platform.Encrypted(t, in, false)
	forged.Query.Set("msg_signature", strings.Repeat("a", 40))
	platform.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	stale := platform.Encrypted(t, in, false)
	platform.Now = time.Now
	wrongReceiver := stranger.Encrypted(t, in, false)
	corrupt := platform.Encrypted(t, in, false)
	corrupt.Body = flipCiphertext(t, platform, corrupt)

	cases := []struct {
		name   string
		req    wechattest.Request
		reason string
	}{
		{"forged signature", forged, wxcrypto.ReasonBadSignature},
		{"stale timestamp", stale, wxcrypto.ReasonStaleTimestamp},
		{"wrong receive id", wrongReceiver, wxcrypto.ReasonWrongReceiver},
		{"corrupt ciphertext", corrupt, wxcrypto.ReasonDecryptFailed},
	}
	var first *wechattest.Answer
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := wechattest.Post(t, rp.url(), c.req)
			if a.Status != http.StatusForbidden {
				t.Fatalf("answered %d %q", a.Status, a.Body)
			}
			if first == nil {
				first = &a
			} else if !bytes.Equal(a.Body, first.Body) || a.Status != first.Status {
				t.Fatalf("answer %d %q differs from %d %q", a.Status, a.Body, first.Status, first.Body)
			}
			if n := rejected(rp.m, c.reason); n != 1 {
				t.Fatalf("rejected{reason=%s} = %v", c.reason, n)
			}
		})
	}
	if got := rp.gw.messages(); len(got) != 0 {
		t.Fatalf("refused callbacks reached the gateway: %+v", got)
	}
	// The URL check is refused the same way.
	q := platform.WeComURLCheck(t, "echo-123")
	q.Set("msg_signature", strings.Repeat("b", 40))
	if a := wechattest.Get(t, rp.url(), q); a.Status != first.Status || !bytes.Equal(a.Body, first.Body) {
		t.Fatalf("a forged URL check answered %d %q", a.Status, a.Body)
	}
	if a := wechattest.Get(t, rp.url(), platform.WeComURLCheck(t, "echo-123")); a.Status != http.StatusOK || string(a.Body) != "echo-123" {
		t.Fatalf("the URL check answered %d %q", a.Status, a.Body)
	}
}

// flipCiphertext flips one bit of the ciphertext — the one that, in CBC,
// flips the padding length of the last block — and signs the result, so
// that only decryption can notice.
func flipCiphertext(t *testing.T, p *wechattest.Platform, r wechattest.Request) []byte {
	t.Helper()
	env, err := wxcrypto.ParseEnvelope(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Encrypt)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-17] ^= 1
	enc := base64.StdEncoding.EncodeToString(raw)
	r.Query.Set("msg_signature", p.Crypter.Sign(r.Query.Get("timestamp"), r.Query.Get("nonce"), enc))
	return []byte("<xml><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>")
}

// WeCom retries a callback three times; a load balancer may send each try
// to another replica. However they arrive, the member gets one answer.
func TestRetriedCallbackAnsweredOnceAcrossReplicas(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	cfg := Config{Apps: []App{testApp(fake)}}
	a := startReplica(t, r, cfg, testOptions(r, "a"))
	b := startReplica(t, r, cfg, testOptions(r, "b"))
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	req := platform.Encrypted(t, wechattest.Inbound{To: testCorp, From: "lisi", Content: "retried question", MsgID: "7001", AgentID: strconv.Itoa(testAgent)}, false)

	var wg sync.WaitGroup
	for _, rp := range []*replica{a, b, a, b} {
		wg.Go(func() {
			if ans := wechattest.Post(t, rp.url(), req); ans.Status != http.StatusOK {
				t.Errorf("a try answered %d %q", ans.Status, ans.Body)
			}
		})
	}
	wg.Wait()
	waitFor(t, "the answer", func() bool { return len(fake.Messages()) > 0 })
	a.gw.turns.Wait()
	b.gw.turns.Wait()
	msgs := fake.Messages()
	if len(msgs) != 1 || msgs[0].Content() != "echo: retried question" || msgs[0].ToUser != "lisi" {
		var all []string
		for _, m := range msgs {
			all = append(all, m.Encode())
		}
		t.Fatalf("answers = %v; want exactly one", all)
	}
	if n := len(a.gw.messages()) + len(b.gw.messages()); n != 1 {
		t.Fatalf("%d turns for one message", n)
	}
}

// Many concurrent turns on two replicas make one token request; when the
// platform expires the token, one replica fetches the next one.
func TestTokenRefreshedByOneReplicaAtATime(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	fake.SetTokenDelay(150 * time.Millisecond) // fetches would overlap
	cfg := Config{Apps: []App{testApp(fake)}}
	replicas := []*Adapter{}
	for _, name := range []string{"a", "b"} {
		ch, err := New(cfg, testOptions(r, name), nil, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, ch)
	}
	burst := func(round int) {
		var wg sync.WaitGroup
		for i := range 20 {
			ch := replicas[i%2]
			wg.Go(func() {
				m := channels.Message{Channel: Name, Workspace: testAppName, Chat: fmt.Sprintf("user%d", i)}
				if err := ch.Send(context.Background(), m, channels.Reply{Text: fmt.Sprintf("round %d turn %d", round, i)}); err != nil {
					t.Errorf("send: %v", err)
				}
			})
		}
		wg.Wait()
	}
	burst(1)
	if n, max := len(fake.TokenCalls()), fake.MaxConcurrentTokenCalls(); n != 1 || max != 1 {
		t.Fatalf("token requests: %d, at most %d at once; want one", n, max)
	}
	fake.ExpireToken()
	burst(2)
	if n, max := len(fake.TokenCalls()), fake.MaxConcurrentTokenCalls(); n != 2 || max != 1 {
		t.Fatalf("after the platform expired the token: %d token requests, at most %d at once; want two, one at a time", n, max)
	}
	if n := len(fake.Messages()); n != 40 {
		t.Fatalf("%d messages delivered, want 40", n)
	}
}

// The platform limits forced refreshes: a token rejected again right after
// a forced refresh is not refreshed again within ForceInterval; the send
// fails instead of hammering the token endpoint.
func TestForcedRefreshIsRateLimited(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	opts := testOptions(r, "a")
	opts.API.Tokens = wxapi.TokenOptions{ForceInterval: time.Hour}
	ch, err := New(Config{Apps: []App{testApp(fake)}}, opts, nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	m := channels.Message{Channel: Name, Workspace: testAppName, Chat: "wangwu"}
	ctx := context.Background()
	if err := ch.Send(ctx, m, channels.Reply{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	fake.ExpireToken()
	if err := ch.Send(ctx, m, channels.Reply{Text: "two"}); err != nil {
		t.Fatalf("the first forced refresh should go through: %v", err)
	}
	fake.ExpireToken()
	err = ch.Send(ctx, m, channels.Reply{Text: "three"})
	if err == nil || !errors.Is(err, wxapi.ErrForceLimited) {
		t.Fatalf("send with a rejected token inside the force interval = %v; want ErrForceLimited", err)
	}
	if n := len(fake.TokenCalls()); n != 2 {
		t.Fatalf("%d token requests; want 2 (the first and one forced)", n)
	}
}

// What a callback carries decides what happens: text and transcribed voice
// reach the gateway; pictures and untranscribed voice get one note each
// (however often they are delivered); events are acked and ignored.
func TestMessageTypes(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	rp := startReplica(t, r, Config{Apps: []App{testApp(fake)}}, testOptions(r, "a"))
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	agent := strconv.Itoa(testAgent)
	post := func(in wechattest.Inbound) {
		t.Helper()
		in.To, in.AgentID = testCorp, agent
		req := platform.Encrypted(t, in, false)
		for range 2 { // delivered twice, as a retry would
			if a := wechattest.Post(t, rp.url(), req); a.Status != http.StatusOK || len(a.Body) != 0 {
				t.Fatalf("%s answered %d %q", in.MsgType, a.Status, a.Body)
			}
		}
	}
	post(wechattest.Inbound{From: "u1", Content: "  a question  ", MsgID: "1"})
	post(wechattest.Inbound{From: "u2", MsgType: "voice", Recognition: "spoken question", MsgID: "2"})
	post(wechattest.Inbound{From: "u3", MsgType: "image", PicURL: "https://example.invalid/p.png", MsgID: "3"})
	post(wechattest.Inbound{From: "u4", MsgType: "voice", MsgID: "4"})
	post(wechattest.Inbound{From: "u5", MsgType: "event", Event: "enter_agent"})
	post(wechattest.Inbound{From: "u6", MsgType: "event", Event: "subscribe"})

	waitFor(t, "answers and notes", func() bool { return len(fake.Messages()) >= 4 })
	rp.gw.turns.Wait()
	var got []string
	for _, m := range rp.gw.messages() {
		got = append(got, m.Chat+"="+m.Text+"|"+m.Unsupported)
	}
	// The notes are the gateway's to give, after its access rules.
	if strings.Join(got, ",") != "u1=a question|,u2=spoken question|,u3=|"+unsupportedNote+",u4=|"+unsupportedNote {
		t.Fatalf("gateway got %v", got)
	}
	byUser := map[string][]string{}
	for _, m := range fake.Messages() {
		byUser[m.ToUser] = append(byUser[m.ToUser], m.Content())
	}
	for user, want := range map[string]string{"u1": "echo: a question", "u2": "echo: spoken question", "u3": unsupportedNote, "u4": unsupportedNote} {
		if len(byUser[user]) != 1 || byUser[user][0] != want {
			t.Errorf("%s got %q; want one %q", user, byUser[user], want)
		}
	}
	if len(byUser["u5"])+len(byUser["u6"]) != 0 {
		t.Errorf("events were answered: %v", byUser)
	}
}

// Long answers are split to WeCom's 2048 bytes; the text format drops
// Markdown; an app with an appchat answers in the group, quoting the
// question, and keeps notices private.
func TestAnswerFormats(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	md, text, group := testApp(fake), testApp(fake), testApp(fake)
	text.Name, text.Format = "plain", FormatText
	group.Name, group.AppChat = "team", "wrkSFfCgAAxxxxxx"
	ch, err := New(Config{Apps: []App{md, text, group}}, testOptions(r, "a"), nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("这是一段很长的回答。", 200) // 6000 bytes
	send := func(app, text string, notice bool) []wechattest.AppMessage {
		t.Helper()
		before := len(fake.Messages())
		m := channels.Message{Channel: Name, Workspace: app, Chat: "zhaoliu", User: "zhaoliu", Text: "what is **this**?"}
		if err := ch.Send(ctx, m, channels.Reply{Text: text, Notice: notice}); err != nil {
			t.Fatal(err)
		}
		return fake.Messages()[before:]
	}

	parts := send(testAppName, long, false)
	if len(parts) != 3 {
		t.Fatalf("%d parts for %d bytes", len(parts), len(long))
	}
	var joined strings.Builder
	for _, p := range parts {
		if len(p.Content()) > MessageLimit || p.MsgType != "markdown" || p.ToUser != "zhaoliu" {
			t.Fatalf("part %s", p.Encode())
		}
		joined.WriteString(p.Content())
	}
	if joined.String() != long {
		t.Fatal("the parts do not add up to the answer")
	}

	if got := send("plain", "## Title\n**bold** and [a link](https://example.com)", false); len(got) != 1 || got[0].MsgType != "text" || got[0].Content() != "Title\nbold and a link (https://example.com)" {
		t.Fatalf("text format: %+v", got)
	}

	got := send("team", "the answer", false)
	if len(got) != 1 || got[0].ChatID != "wrkSFfCgAAxxxxxx" || got[0].ToUser != "" || got[0].Content() != "> zhaoliu: what is **this**?\n\nthe answer" {
		t.Fatalf("appchat answer: %+v", got)
	}
	if n := len(fake.Calls(wechattest.WeComAppChatPath)); n != 1 {
		t.Fatalf("%d appchat/send calls", n)
	}
	if got := send("team", "Sorry, not for you.", true); len(got) != 1 || got[0].ToUser != "zhaoliu" || got[0].ChatID != "" {
		t.Fatalf("a notice went to %+v; want the member privately", got)
	}
}

// A body over the limit is refused unread; a body that trickles in is
// cut off; a callback without any signature is refused like a forged one;
// an unknown app has no route.
func TestOversizedSlowUnauthenticatedAndUnknown(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	opts := testOptions(r, "a")
	opts.BodyTimeout = 200 * time.Millisecond
	rp := startReplica(t, r, Config{Apps: []App{testApp(fake)}}, opts)
	if status := wechattest.PostStalled(t, rp.url(), 4096, []byte("<xml><Encrypt>")); status != 0 && status != http.StatusForbidden {
		t.Fatalf("a stalled body answered %d", status)
	}
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	bare := platform.Encrypted(t, wechattest.Inbound{To: testCorp, From: "u", Content: "hi", MsgID: "9"}, false)
	bare.Query = url.Values{}
	if a := wechattest.Post(t, rp.url(), bare); a.Status != http.StatusForbidden {
		t.Fatalf("an unsigned callback answered %d %q", a.Status, a.Body)
	}
	if got := rp.gw.messages(); len(got) != 0 {
		t.Fatalf("reached the gateway: %+v", got)
	}
	big := wechattest.Request{Query: url.Values{}, Body: bytes.Repeat([]byte("x"), wxcrypto.MaxBody+1)}
	if a := wechattest.Post(t, rp.url(), big); a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body answered %d", a.Status)
	}
	if n := rejected(rp.m, ReasonTooLarge); n != 1 {
		t.Fatalf("rejected{too_large} = %v", n)
	}
	resp, err := http.Post(rp.srv.URL+PathPrefix+"other", "text/xml", strings.NewReader("<xml/>"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown app answered %d", resp.StatusCode)
	}
}

// A refused secret fails the send with a hint and never shows the secret.
func TestRefusedCredentials(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	app := testApp(fake)
	app.Secret = "a-wrong-secret-value"
	ch, err := New(Config{Apps: []App{app}}, testOptions(r, "a"), nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Send(context.Background(), channels.Message{Channel: Name, Workspace: testAppName, Chat: "u"}, channels.Reply{Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "check the id and secret") {
		t.Fatalf("send with a wrong secret = %v", err)
	}
	if strings.Contains(err.Error(), "a-wrong-secret-value") || strings.Contains(err.Error(), "corpsecret") {
		t.Fatalf("the error shows the secret or the URL: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := App{Name: "ops", CorpID: "ww1", AgentID: 1000002, Secret: "s", Token: "t", EncodingAESKey: testAESKey}
	edit := func(f func(*App)) []App { a := good; f(&a); return []App{a} }
	tests := []struct {
		name string
		apps []App
		want string // "" = valid
	}{
		{"valid", []App{good}, ""},
		{"two apps", append([]App{good}, edit(func(a *App) { a.Name = "hr" })...), ""},
		{"duplicate name", []App{good, good}, `apps[1].name: "ops" is used by two apps`},
		{"name with a slash", edit(func(a *App) { a.Name = "a/b" }), "apps[0].name"},
		{"no corp id", edit(func(a *App) { a.CorpID = "" }), "apps[0].corp_id: required"},
		{"no agent id", edit(func(a *App) { a.AgentID = 0 }), "apps[0].agent_id: required"},
		{"no secret", edit(func(a *App) { a.Secret = "" }), "apps[0].secret: required"},
		{"unset reference", edit(func(a *App) { a.Secret = "${WECOM_APP_SECRET}" }), "apps[0].secret: the environment variable WECOM_APP_SECRET is not set"},
		{"short key", edit(func(a *App) { a.EncodingAESKey = "short" }), "apps[0].encoding_aes_key: not an EncodingAESKey"},
		{"bad base url", edit(func(a *App) { a.BaseURL = "ftp://x" }), "apps[0].base_url"},
		{"bad format", edit(func(a *App) { a.Format = "html" }), "apps[0].format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Config{Apps: tt.apps}).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testAESKey) {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

// "${NAME}" credentials come from the environment.
func TestEnvReferences(t *testing.T) {
	c := Config{Apps: []App{{Name: "ops", Secret: "${WECOM_APP_SECRET}", Token: "literal", EncodingAESKey: "${WECOM_APP_AES_KEY}"}}}
	var names []string
	for _, v := range c.Env() {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "WECOM_APP_SECRET,WECOM_APP_AES_KEY" {
		t.Fatalf("bindings %v", names)
	}
}
