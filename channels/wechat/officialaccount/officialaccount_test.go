package officialaccount

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/redistest"
)

// The official WXBizMsgCrypt sample as an Official Account in safe mode:
// the sample's encrypted message is opened, answered within the passive
// window, and the passive reply is encrypted so that the platform opens
// it with the same key.
func TestOfficialVectorSafeMode(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, "wx5823bf96d3bd56c7", testSecret)
	cfg := testConfig(fake, "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C")
	cfg.Token = "QDG6eK"
	gw := newGateway(r)
	opts := testOptions(r, "a")
	opts.Now = func() time.Time { return time.Unix(1409659813, 0) }
	rp := startReplica(t, cfg, opts, gw)
	gw.turnOn = func() *Adapter { return rp.ch }
	platform := wechattest.NewPlatform(t, "QDG6eK", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", "wx5823bf96d3bd56c7")

	q := url.Values{
		"msg_signature": {"477715d11cdb4164915debcba66cb864d751f3e6"}, "timestamp": {"1409659813"}, "nonce": {"1372623149"},
		"signature": {wxcrypto.Signature("QDG6eK", "1409659813", "1372623149")}, "encrypt_type": {"aes"}, "openid": {"mycreate"},
	}
	body := []byte("<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><Encrypt><![CDATA[RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==]]></Encrypt></xml>")
	answer := wechattest.Post(t, rp.url(), wechattest.Request{Query: q, Body: body})
	reply, ok := platform.Reply(t, answer)
	if !ok {
		t.Fatalf("no passive reply: %q", answer.Body)
	}
	if reply.Content != "echo: hello" || reply.ToUserName != "mycreate" || reply.FromUserName != "wx5823bf96d3bd56c7" || reply.MsgType != "text" {
		t.Fatalf("passive reply = %+v", reply)
	}
	if n := len(fake.CustomMessages()); n != 0 {
		t.Fatalf("%d customer-service messages besides the passive reply", n)
	}
	if got := gw.messages(); len(got) != 1 || got[0].ID != "wx5823bf96d3bd56c7:4561255354251345929" || got[0].Chat != "mycreate" {
		t.Fatalf("gateway got %+v", got)
	}
}

// All three message modes answer passively, each in its own form; a
// callback in a mode the configuration does not allow is refused.
func TestMessageModes(t *testing.T) {
	for _, tt := range []struct {
		mode      string
		key       string
		request   func(t *testing.T, p *wechattest.Platform, in wechattest.Inbound) wechattest.Request
		encrypted bool
	}{
		{"plaintext", "", func(t *testing.T, p *wechattest.Platform, in wechattest.Inbound) wechattest.Request {
			return p.Plain(in)
		}, false},
		{"compatible", testAESKey, func(t *testing.T, p *wechattest.Platform, in wechattest.Inbound) wechattest.Request {
			return p.Compatible(t, in)
		}, true},
		{"safe", testAESKey, func(t *testing.T, p *wechattest.Platform, in wechattest.Inbound) wechattest.Request {
			return p.Encrypted(t, in, true)
		}, true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			c := newCluster(t, tt.key)
			rp, platform := c.replica(t, "a", nil), c.platform

			answer := wechattest.Post(t, rp.url(), tt.request(t, platform, inbound("o-user-1", "hello "+tt.mode, "101")))
			if encrypted := bytes.Contains(answer.Body, []byte("<Encrypt>")); encrypted != tt.encrypted {
				t.Fatalf("reply encrypted = %v in %s mode: %s", encrypted, tt.mode, answer.Body)
			}
			reply, ok := platform.Reply(t, answer)
			if !ok || reply.Content != "echo: hello "+tt.mode || reply.ToUserName != "o-user-1" || reply.FromUserName != testOriginal {
				t.Fatalf("passive reply = %+v (%v)", reply, ok)
			}

			// The other family of modes is refused.
			var wrong wechattest.Request
			if tt.key == "" {
				wrong = wechattest.NewPlatform(t, testToken, testAESKey, testAppID).Encrypted(t, inbound("o-user-1", "x", "102"), true)
			} else {
				wrong = platform.Plain(inbound("o-user-1", "x", "102"))
			}
			if a := wechattest.Post(t, rp.url(), wrong); a.Status != http.StatusForbidden {
				t.Fatalf("a callback in the wrong mode answered %d %q", a.Status, a.Body)
			}
			if n := rejected(rp.m, ReasonUnencrypted); n != 1 {
				t.Fatalf("rejected{unencrypted} = %v", n)
			}

			// The URL check echoes in every mode.
			if a := wechattest.Get(t, rp.url(), platform.OAURLCheck("echo-42")); a.Status != http.StatusOK || string(a.Body) != "echo-42" {
				t.Fatalf("URL check answered %d %q", a.Status, a.Body)
			}
		})
	}
}

// A forged signature, a stale timestamp, a wrong receive id and a corrupt
// ciphertext are each refused with the very same answer; nothing reaches
// the gateway.
func TestRefusalsAreUniform(t *testing.T) {
	c := newCluster(t, testAESKey)
	rp, platform := c.replica(t, "a", nil), c.platform
	in := inbound("o-user", "hi", "7")

	forged := platform.Encrypted(t, in, true)
	forged.Query.Set("msg_signature", strings.Repeat("c", 40))
	platform.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	stale := platform.Encrypted(t, in, true)
	platform.Now = time.Now
	wrongReceiver := wechattest.NewPlatform(t, testToken, testAESKey, "wx-another-account").Encrypted(t, in, true)
	corrupt := platform.Encrypted(t, in, true)
	env, err := wxcrypto.ParseEnvelope(corrupt.Body)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(env.Encrypt)
	raw[len(raw)-17] ^= 1 // flips the padding length of the last block
	enc := base64.StdEncoding.EncodeToString(raw)
	corrupt.Body = []byte("<xml><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>")
	corrupt.Query.Set("msg_signature", platform.Crypter.Sign(corrupt.Query.Get("timestamp"), corrupt.Query.Get("nonce"), enc))

	var answers []wechattest.Answer
	for _, c := range []struct {
		req    wechattest.Request
		reason string
	}{
		{forged, wxcrypto.ReasonBadSignature},
		{stale, wxcrypto.ReasonStaleTimestamp},
		{wrongReceiver, wxcrypto.ReasonWrongReceiver},
		{corrupt, wxcrypto.ReasonDecryptFailed},
	} {
		a := wechattest.Post(t, rp.url(), c.req)
		answers = append(answers, a)
		if n := rejected(rp.m, c.reason); n != 1 {
			t.Errorf("rejected{%s} = %v", c.reason, n)
		}
	}
	for _, a := range answers {
		if a.Status != http.StatusForbidden || !bytes.Equal(a.Body, answers[0].Body) {
			t.Fatalf("answers differ: %d %q vs %d %q", a.Status, a.Body, answers[0].Status, answers[0].Body)
		}
	}
	forgedCheck := platform.OAURLCheck("e")
	forgedCheck.Set("signature", strings.Repeat("d", 40))
	if a := wechattest.Get(t, rp.url(), forgedCheck); a.Status != answers[0].Status || !bytes.Equal(a.Body, answers[0].Body) {
		t.Fatalf("a forged URL check answered %d %q", a.Status, a.Body)
	}
	if got := c.gw.messages(); len(got) != 0 {
		t.Fatalf("refused callbacks reached the gateway: %+v", got)
	}
}

// The callback arrives on replica A; the turn runs on replica B and
// answers in time: the answer crosses over through Redis and is A's
// passive reply. Nothing goes out as a customer-service message.
func TestPassiveReplyFromAnotherReplica(t *testing.T) {
	c := newCluster(t, testAESKey)
	c.replica(t, "b", nil) // runs the turns
	a := c.replica(t, "a", nil)
	fake, gw, platform := c.fake, c.gw, c.platform

	reply, ok := platform.Reply(t, wechattest.Post(t, a.url(), platform.Encrypted(t, inbound("o-cross", "cross over", "201"), true)))
	if !ok || reply.Content != "echo: cross over" {
		t.Fatalf("passive reply = %+v (%v)", reply, ok)
	}
	gw.turns.Wait()
	if n := len(fake.CustomMessages()); n != 0 {
		t.Fatalf("%d customer-service messages besides the passive reply", n)
	}
}

// The 5-second switch: a turn slower than the passive window. The callback
// answers empty when its time is up; the user sees "typing"; the answer
// then goes out once, as a customer-service message, from the replica
// that ran the turn.
func TestSlowAnswerGoesOutActivelyOnce(t *testing.T) {
	c := newCluster(t, testAESKey)
	c.gw.release = make(chan struct{})
	short := func(o *Options) { o.PassiveWait = 300 * time.Millisecond }
	c.replica(t, "b", short) // runs the turns
	a := c.replica(t, "a", short)
	fake, gw, platform := c.fake, c.gw, c.platform

	answer := wechattest.Post(t, a.url(), platform.Encrypted(t, inbound("o-slow", "a slow question", "301"), true))
	if _, ok := platform.Reply(t, answer); ok || string(answer.Body) != "success" {
		t.Fatalf("the callback answered %q; want the empty reply once its window passed", answer.Body)
	}
	waitFor(t, "the typing indicator", func() bool { return len(fake.Typings()) > 0 })
	if ty := fake.Typings()[0]; ty.ToUser != "o-slow" || ty.Command != "Typing" {
		t.Fatalf("typing = %+v", ty)
	}
	close(gw.release)
	waitFor(t, "the customer-service message", func() bool { return len(fake.CustomMessages()) > 0 })
	gw.turns.Wait()
	msgs := fake.CustomMessages()
	if len(msgs) != 1 || msgs[0].Text.Content != "echo: a slow question" || msgs[0].ToUser != "o-slow" || msgs[0].Replica != "b" {
		t.Fatalf("customer-service messages = %+v; want one from replica b", msgs)
	}
	if errs := gw.sendErrors(); len(errs) != 0 {
		t.Fatalf("send errors: %v", errs)
	}
}

// WeChat retries; a load balancer spreads the tries over replicas. Each
// message — answered fast or slow — reaches the user exactly once:
// passively in one response, or actively, never both.
func TestRetriedCallbackAnsweredOnceAcrossReplicas(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			c := newCluster(t, testAESKey)
			var edit func(*Options)
			if slow {
				c.gw.release = make(chan struct{})
				edit = func(o *Options) { o.PassiveWait = 200 * time.Millisecond }
			}
			a, b := c.replica(t, "a", edit), c.replica(t, "b", edit)
			var turn int
			c.gw.turnOn = func() *Adapter { turn++; return []*Adapter{a.ch, b.ch}[turn%2] }
			fake, gw, platform := c.fake, c.gw, c.platform

			const messages = 10
			var mu sync.Mutex
			passive := map[string]int{}
			var wg sync.WaitGroup
			for i := range messages {
				user := fmt.Sprintf("o-user-%d", i)
				req := platform.Encrypted(t, inbound(user, "question "+user, fmt.Sprint(1000+i)), true)
				for _, rp := range []*replica{a, b, a} { // the first try and two retries
					wg.Go(func() {
						if reply, ok := platform.Reply(t, wechattest.Post(t, rp.url(), req)); ok {
							mu.Lock()
							passive[reply.ToUserName]++
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			if slow {
				close(gw.release)
			}
			gw.turns.Wait()
			active := map[string]int{}
			for _, m := range fake.CustomMessages() {
				active[m.ToUser]++
			}
			for i := range messages {
				user := fmt.Sprintf("o-user-%d", i)
				if n := passive[user] + active[user]; n != 1 {
					t.Errorf("%s got %d passive and %d active answers; want exactly one", user, passive[user], active[user])
				}
			}
			if n := len(gw.messages()); n != messages {
				t.Errorf("%d turns for %d messages", n, messages)
			}
		})
	}
}

// A retry that arrives after the passive reply was served is answered
// empty: the answer is not sent a second time.
func TestRetryAfterTheReplyIsServed(t *testing.T) {
	c := newCluster(t, "")
	a, b := c.replica(t, "a", nil), c.replica(t, "b", nil)
	fake, gw, platform := c.fake, c.gw, c.platform
	req := platform.Plain(inbound("o-again", "once", "401"))
	if _, ok := platform.Reply(t, wechattest.Post(t, a.url(), req)); !ok {
		t.Fatal("no passive reply to the first try")
	}
	if answer := wechattest.Post(t, b.url(), req); string(answer.Body) != "success" {
		t.Fatalf("the retry answered %q", answer.Body)
	}
	gw.turns.Wait()
	if n := len(fake.CustomMessages()); n != 0 {
		t.Fatalf("%d customer-service messages after a served passive reply", n)
	}
}

// An answer too long for one passive reply releases the callback at once
// and goes out as several customer-service messages of at most 2048 bytes.
func TestLongAnswerGoesOutActively(t *testing.T) {
	c := newCluster(t, "")
	long := strings.Repeat("很长的回答，", 400) // 7200 bytes
	c.gw.answer = func(string) string { return long }
	rp := c.replica(t, "a", nil) // PassiveWait 10 s
	fake, gw, platform := c.fake, c.gw, c.platform
	answered := make(chan wechattest.Answer, 1)
	go func() {
		answered <- wechattest.Post(t, rp.url(), platform.Plain(inbound("o-long", "tell me everything", "501")))
	}()
	// The callback ends well before its 10 s: the handoff released it.
	select {
	case a := <-answered:
		if string(a.Body) != "success" {
			t.Fatalf("answered %q", a.Body)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the callback was not released when the answer went out actively")
	}
	gw.turns.Wait()
	var joined strings.Builder
	msgs := fake.CustomMessages()
	for _, m := range msgs {
		if len(m.Text.Content) > MessageLimit {
			t.Fatalf("a message of %d bytes", len(m.Text.Content))
		}
		joined.WriteString(m.Text.Content)
	}
	if len(msgs) != 4 || joined.String() != long {
		t.Fatalf("%d messages that add up to %d of %d bytes", len(msgs), joined.Len(), len(long))
	}
}

// An answer that finds the 48-hour window closed is kept; when the user
// writes again it comes first, with a note saying why it is late.
func TestClosedWindowKeepsTheAnswer(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	ch, err := New(testConfig(fake, ""), testOptions(r, "a"), nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := channels.Message{Channel: Name, Workspace: testAppID, Chat: "o-away", User: "o-away"}
	fake.CloseWindow("o-away", true)
	err = ch.Send(ctx, user, channels.Reply{Text: "the late answer"})
	if !errors.Is(err, ErrWindowClosed) {
		t.Fatalf("send into a closed window = %v", err)
	}
	if n := len(fake.CustomMessages()); n != 0 {
		t.Fatalf("%d messages delivered into a closed window", n)
	}
	fake.CloseWindow("o-away", false) // the user wrote again
	if err := ch.Send(ctx, user, channels.Reply{Text: "the new answer"}); err != nil {
		t.Fatal(err)
	}
	msgs := fake.CustomMessages()
	if len(msgs) != 2 || msgs[0].Text.Content != heldNote+"the late answer" || msgs[1].Text.Content != "the new answer" {
		t.Fatalf("messages = %+v", msgs)
	}
	if err := ch.Send(ctx, user, channels.Reply{Text: "third"}); err != nil {
		t.Fatal(err)
	}
	if msgs := fake.CustomMessages(); len(msgs) != 3 {
		t.Fatalf("the held answer was delivered again: %+v", msgs)
	}
}

// Pictures and untranscribed voice get a passive note (the gateway's);
// transcribed voice is a question; events are acked empty.
func TestMessageTypes(t *testing.T) {
	c := newCluster(t, testAESKey)
	rp, gw, platform := c.replica(t, "a", nil), c.gw, c.platform
	post := func(in wechattest.Inbound) (string, bool) {
		in.To = testOriginal
		reply, ok := platform.Reply(t, wechattest.Post(t, rp.url(), platform.Encrypted(t, in, true)))
		return reply.Content, ok
	}
	image := wechattest.Inbound{To: testOriginal, From: "u1", MsgType: "image", PicURL: "https://example.invalid/p.png", MsgID: "1"}
	imageReq := platform.Encrypted(t, image, true)
	if reply, ok := platform.Reply(t, wechattest.Post(t, rp.url(), imageReq)); !ok || reply.Content != unsupportedNote {
		t.Errorf("image: %+v", reply)
	}
	if _, ok := platform.Reply(t, wechattest.Post(t, rp.url(), imageReq)); ok {
		t.Error("a retried image was noted twice")
	}
	if got, ok := post(wechattest.Inbound{From: "u2", MsgType: "voice", MsgID: "2"}); !ok || got != unsupportedNote {
		t.Errorf("untranscribed voice: %q", got)
	}
	if got, ok := post(wechattest.Inbound{From: "u3", MsgType: "voice", Recognition: "你好", MsgID: "3"}); !ok || got != "echo: 你好" {
		t.Errorf("transcribed voice: %q", got)
	}
	if got, ok := post(wechattest.Inbound{From: "u4", MsgType: "event", Event: "subscribe"}); ok {
		t.Errorf("subscribe was answered: %q", got)
	}
	// The notes are the gateway's to give (after its access rules): the
	// image and the untranscribed voice were handed over with them.
	var got []string
	for _, m := range gw.messages() {
		got = append(got, m.User+"="+m.Text+"|"+m.Unsupported)
	}
	if want := "u1=|" + unsupportedNote + ",u2=|" + unsupportedNote + ",u3=你好|"; strings.Join(got, ",") != want {
		t.Errorf("gateway got %q; want %q", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{AppID: "wx1", AppSecret: "s", Token: "t", EncodingAESKey: testAESKey, BaseURL: DefaultBaseURL}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"plaintext mode", func(c *Config) { c.EncodingAESKey = "" }, ""},
		{"nothing set", func(c *Config) { *c = *DefaultConfig() }, ""},
		{"no app id", func(c *Config) { c.AppID = "" }, "app_id: required"},
		{"no secret", func(c *Config) { c.AppSecret = "" }, "app_secret: required"},
		{"no token", func(c *Config) { c.Token = "" }, "token: required"},
		{"bad key", func(c *Config) { c.EncodingAESKey = "too-short" }, "encoding_aes_key: not an EncodingAESKey"},
		{"unset reference", func(c *Config) { c.AppSecret = "${OA_SECRET}" }, "app_secret: the environment variable OA_SECRET is not set"},
		{"bad base url", func(c *Config) { c.BaseURL = "api.weixin.qq.com" }, "base_url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// A body over the limit is refused unread; a body that trickles in is cut
// off; a callback without a signature is refused like a forged one.
func TestOversizedSlowAndUnauthenticated(t *testing.T) {
	c := newCluster(t, "")
	rp := c.replica(t, "a", func(o *Options) { o.BodyTimeout = 200 * time.Millisecond })
	big := wechattest.Request{Query: url.Values{}, Body: bytes.Repeat([]byte("x"), wxcrypto.MaxBody+1)}
	if a := wechattest.Post(t, rp.url(), big); a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body answered %d", a.Status)
	}
	if n := rejected(rp.m, ReasonTooLarge); n != 1 {
		t.Fatalf("rejected{too_large} = %v", n)
	}
	if status := wechattest.PostStalled(t, rp.url(), 4096, []byte("<xml><Content>")); status != 0 && status != http.StatusForbidden {
		t.Fatalf("a stalled body answered %d", status)
	}
	bare := c.platform.Plain(inbound("o-user", "hi", "9"))
	bare.Query = url.Values{}
	if a := wechattest.Post(t, rp.url(), bare); a.Status != http.StatusForbidden {
		t.Fatalf("an unsigned callback answered %d %q", a.Status, a.Body)
	}
	if got := c.gw.messages(); len(got) != 0 {
		t.Fatalf("reached the gateway: %+v", got)
	}
}

// TestARateLimitedOfficialAccountSenderIsAnsweredAtOnce: a message the
// gateway refuses without a reply (a rate-limited sender inside the
// notice window), its turn run on another replica, ends the waiting
// callback at once with the empty answer, long before its passive
// deadline (ten minutes here, so a callback left to it would not return
// within the test); a retry of the callback is answered empty too, and
// nothing goes out as a customer-service message.
func TestARateLimitedOfficialAccountSenderIsAnsweredAtOnce(t *testing.T) {
	c := newCluster(t, testAESKey)
	c.gw.quiet = func(text string) bool { return text == "too fast" }
	long := func(o *Options) { o.PassiveWait = 10 * time.Minute }
	c.replica(t, "b", long) // runs the turns
	a := c.replica(t, "a", long)
	req := c.platform.Encrypted(t, inbound("o-fast", "too fast", "901"), true)

	answered := make(chan wechattest.Answer, 1)
	go func() { answered <- wechattest.Post(t, a.url(), req) }()
	var got wechattest.Answer
	select {
	case got = <-answered:
	case <-time.After(time.Minute): // a bound on a failing test, not a measurement
		t.Fatal("the callback of a quietly refused message is still waiting")
	}
	if got.Status != http.StatusOK || string(got.Body) != "success" {
		t.Fatalf("answer = %d %q; want the empty reply", got.Status, got.Body)
	}
	if retry := wechattest.Post(t, a.url(), req); retry.Status != http.StatusOK || string(retry.Body) != "success" {
		t.Fatalf("the retry was answered %d %q; want the empty reply", retry.Status, retry.Body)
	}
	c.gw.turns.Wait()
	if n := len(c.fake.CustomMessages()); n != 0 {
		t.Fatalf("%d customer-service messages for a refused message", n)
	}
}
