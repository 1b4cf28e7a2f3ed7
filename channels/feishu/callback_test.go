package feishu

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

func TestDecryptOfficialVector(t *testing.T) {
	t.Parallel()
	got, err := Decrypt("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "test key")
	if err != nil || string(got) != "hello world" {
		t.Fatalf("Decrypt = %q, %v; want hello world", got, err)
	}
}

func TestSignatureVector(t *testing.T) {
	t.Parallel()
	const want = "5e1d3ec760c9b1047e0c2ace8f278e16862ec42000daa56bb6c6c4b83d6b51ac"
	if got := Signature("1", "n", "test key", []byte("{}")); got != want {
		t.Fatalf("Signature = %s; want %s", got, want)
	}
	if !validSignature(want, "1", "n", "test key", []byte("{}")) || validSignature(strings.ToUpper(want), "1", "n", "test key", []byte("{}")) {
		t.Fatal("validSignature disagrees with the vector")
	}
}

func TestDecryptRejectsBadPaddingAndShortInput(t *testing.T) {
	t.Parallel()
	iv := bytes.Repeat([]byte{7}, 16)
	enc, err := encrypt([]byte("hello world"), "k", iv)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decrypt(enc, "k"); err != nil || string(got) != "hello world" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
	// Flipping a bit of the IV flips the same bit of the (only) plaintext
	// block: the last padding byte 5 becomes 4, which is not PKCS#7.
	raw := mustB64(t, enc)
	raw[15] ^= 1
	if _, err := Decrypt(b64(raw), "k"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered padding: err = %v; want ErrDecrypt", err)
	}
	for _, in := range []string{"", "not base64!", b64(make([]byte, 16)), b64(make([]byte, 33))} {
		if _, err := Decrypt(in, "k"); !errors.Is(err, ErrDecrypt) {
			t.Errorf("Decrypt(%q) err = %v; want ErrDecrypt", in, err)
		}
	}
	// A wrong key almost never yields valid padding; with a fixed IV and
	// text this one does not.
	if _, err := Decrypt(enc, "other key"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong key: err = %v", err)
	}
}

func groupMention(id string) []byte {
	return feishutest.Event(feishutest.Message{
		Token: testToken, MessageID: id, ChatID: "oc_group", ChatType: "group", Sender: "ou_alice",
		Content: feishutest.Text("@_user_1 hello"), Mentions: []feishutest.Mention{mentionBot()},
	})
}

func TestCallbacksThroughTheRealHandler(t *testing.T) {
	t.Parallel()
	type tc struct {
		name       string
		plain      bool // channel without an Encrypt Key
		req        func(f *fixture) *http.Request
		wantStatus int
		wantBody   string
		reason     string // counted rejection; "" means accepted
		submitted  int
	}
	signed := func(f *fixture, body []byte) *http.Request {
		return feishutest.Request(f.srv.URL+EventsPath, body, testKey, f.now)
	}
	cases := []tc{
		{name: "encrypted and signed event", req: func(f *fixture) *http.Request {
			return signed(f, feishutest.Encrypted(groupMention("om_1"), testKey))
		}, wantStatus: 200, submitted: 1},
		{name: "plain event, token only", plain: true, req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, groupMention("om_1"), "", f.now)
		}, wantStatus: 200, submitted: 1},
		{name: "challenge, plain", plain: true, req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Challenge(testToken, "ch-123"), "", f.now)
		}, wantStatus: 200, wantBody: `"challenge":"ch-123"`},
		{name: "challenge, encrypted, unsigned", req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(feishutest.Challenge(testToken, "ch-456"), testKey), "", f.now)
		}, wantStatus: 200, wantBody: `"challenge":"ch-456"`},
		{name: "challenge with a wrong token", plain: true, req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Challenge("wrong", "ch"), "", f.now)
		}, wantStatus: 401, reason: ReasonBadToken},
		{name: "bad signature", req: func(f *fixture) *http.Request {
			r := signed(f, feishutest.Encrypted(groupMention("om_1"), testKey))
			r.Header.Set(HeaderSignature, strings.Repeat("0", 64))
			return r
		}, wantStatus: 401, reason: ReasonBadSignature},
		{name: "signed with another key", req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(groupMention("om_1"), testKey), "other", f.now)
		}, wantStatus: 401, reason: ReasonBadSignature},
		{name: "unsigned event", req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(groupMention("om_1"), testKey), "", f.now)
		}, wantStatus: 401, reason: ReasonBadSignature},
		{name: "stale timestamp", req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(groupMention("om_1"), testKey), testKey, f.now.Add(-6*time.Minute))
		}, wantStatus: 401, reason: ReasonStaleTimestamp},
		{name: "timestamp from the future", req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(groupMention("om_1"), testKey), testKey, f.now.Add(time.Hour))
		}, wantStatus: 401, reason: ReasonStaleTimestamp},
		{name: "wrong token on a normal event (encrypted, signed)", req: func(f *fixture) *http.Request {
			ev := feishutest.Event(feishutest.Message{Token: "wrong", MessageID: "om_1", ChatID: "oc_p", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("hi")})
			return signed(f, feishutest.Encrypted(ev, testKey))
		}, wantStatus: 401, reason: ReasonBadToken},
		{name: "wrong token on a normal event (plain)", plain: true, req: func(f *fixture) *http.Request {
			ev := feishutest.Event(feishutest.Message{Token: "wrong", MessageID: "om_1", ChatID: "oc_p", ChatType: "p2p", Sender: "ou_a", Content: feishutest.Text("hi")})
			return feishutest.Request(f.srv.URL+EventsPath, ev, "", f.now)
		}, wantStatus: 401, reason: ReasonBadToken},
		{name: "malformed JSON (plain)", plain: true, req: func(f *fixture) *http.Request {
			return feishutest.Request(f.srv.URL+EventsPath, []byte(`{"schema":"2.0",`), "", f.now)
		}, wantStatus: 401, reason: ReasonBadRequest},
		{name: "malformed JSON (signed)", req: func(f *fixture) *http.Request {
			return signed(f, []byte(`{"encrypt":`))
		}, wantStatus: 400, reason: ReasonBadRequest},
		{name: "malformed JSON inside the ciphertext", req: func(f *fixture) *http.Request {
			return signed(f, feishutest.Encrypted([]byte(`{"header":`), testKey))
		}, wantStatus: 400, reason: ReasonBadRequest},
		{name: "undecryptable", req: func(f *fixture) *http.Request {
			return signed(f, []byte(`{"encrypt":"P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk="}`))
		}, wantStatus: 400, reason: ReasonDecryptFailed},
		{name: "not encrypted although a key is set", req: func(f *fixture) *http.Request {
			return signed(f, groupMention("om_1"))
		}, wantStatus: 400, reason: ReasonBadRequest},
		{name: "oversized body", req: func(f *fixture) *http.Request {
			big := bytes.Repeat([]byte("a"), channels.MaxWebhookBody+1)
			return signed(f, big)
		}, wantStatus: 401, reason: ReasonTooLarge},
		{name: "unknown event type is acked and ignored", req: func(f *fixture) *http.Request {
			ev := []byte(`{"schema":"2.0","header":{"event_id":"e9","event_type":"im.chat.updated_v1","token":"` + testToken + `"},"event":{}}`)
			return signed(f, feishutest.Encrypted(ev, testKey))
		}, wantStatus: 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *Config, _ *Options) {
				if c.plain {
					cfg.EncryptKey = ""
				}
			})
			status, body := f.do(t, c.req(f))
			if status != c.wantStatus {
				t.Fatalf("status %d (%s); want %d", status, body, c.wantStatus)
			}
			if c.wantBody != "" && !strings.Contains(body, c.wantBody) {
				t.Errorf("body %q lacks %q", body, c.wantBody)
			}
			if c.reason != "" {
				if v := testutil.ToFloat64(f.m.MessagesRejected.WithLabelValues(Name, c.reason)); v != 1 {
					t.Errorf("rejected{reason=%s} = %v; want 1", c.reason, v)
				}
			} else if n := testutil.CollectAndCount(f.m.MessagesRejected); n != 0 {
				t.Errorf("%d rejection series for an accepted callback", n)
			}
			if got := len(f.rec.messages()); got != c.submitted {
				t.Errorf("%d messages submitted; want %d", got, c.submitted)
			}
			if len(f.api.Sent()) != 0 {
				t.Errorf("a callback caused a send: %+v", f.api.Sent())
			}
		})
	}
}

func TestChallengeAnsweredFast(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// Even with the Open API failing, the challenge needs nothing from it.
	f.api.Fail("bot_info", feishutest.Failure{Status: 500, Code: 1})
	start := time.Now()
	status, body := f.do(t, feishutest.Request(f.srv.URL+EventsPath, feishutest.Encrypted(feishutest.Challenge(testToken, "fast"), testKey), "", f.now))
	if status != 200 || !strings.Contains(body, "fast") {
		t.Fatalf("challenge: %d %s", status, body)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(body), &out); err != nil || out["challenge"] != "fast" {
		t.Fatalf("challenge answer %q is not {\"challenge\":…}", body)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("challenge took %v (a loaded machine?)", d)
	}
	if f.api.BotInfoRequests() != 0 || f.api.TokenRequests() != 0 {
		t.Error("the challenge called the Open API")
	}
}

func TestRepushOfATakenMessageIsDroppedByMessageID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ev := groupMention("om_taken")
	for i := 0; i < 2; i++ {
		if status, body := f.post(t, ev); status != 200 {
			t.Fatalf("push %d: %d %s", i, status, body)
		}
	}
	// A re-push under a new event_id (another connection, another replica)
	// carries the same message_id.
	again := feishutest.Event(feishutest.Message{
		EventID: "ev_other", Token: testToken, MessageID: "om_taken", ChatID: "oc_group", ChatType: "group", Sender: "ou_alice",
		Content: feishutest.Text("@_user_1 hello"), Mentions: []feishutest.Mention{mentionBot()},
	})
	if status, _ := f.post(t, again); status != 200 {
		t.Fatalf("re-push with a new event_id: %d", status)
	}
	msgs := f.rec.messages()
	if len(msgs) != 1 || msgs[0].ID != "om_taken" {
		t.Fatalf("submitted %+v; want one message with ID om_taken", msgs)
	}
	if f.rec.dups != 2 {
		t.Fatalf("handler saw %d duplicates; want 2 (de-dup is on message_id)", f.rec.dups)
	}
}

func TestCallbacksRefusedWithoutTokenOrKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { c.EncryptKey, c.VerificationToken, c.Mode = "", "", "" })
	status, _ := f.do(t, feishutest.Request(f.srv.URL+EventsPath, groupMention("om_1"), "", f.now))
	if status != http.StatusUnauthorized || len(f.rec.messages()) != 0 {
		t.Fatalf("unauthenticated callback: status %d, %d submitted", status, len(f.rec.messages()))
	}
	if _, err := New(Config{AppID: "a", AppSecret: "b", Mode: "webhook"}, Options{}, nil, nil); err == nil {
		t.Fatal("webhook mode without token or key was accepted")
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFeishuCallbackNoDecryptionOracle: with an Encrypt Key, every request
// refused before authentication — unsigned, badly signed, stale, oversized,
// undecryptable, bad padding, JSON that is not an event — gets the same
// status and body, and a request with signature headers that do not verify
// is refused before its body is decrypted.
func TestFeishuCallbackNoDecryptionOracle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	unsigned := func(body []byte) *http.Request {
		return feishutest.Request(f.srv.URL+EventsPath, body, "", f.now)
	}
	badSig := func(body []byte) *http.Request {
		r := feishutest.Request(f.srv.URL+EventsPath, body, testKey, f.now)
		r.Header.Set(HeaderSignature, strings.Repeat("a", 64))
		return r
	}
	good := feishutest.Encrypted(groupMention("om_1"), testKey)
	var flipped []byte
	{
		var enc struct{ Encrypt string }
		if err := json.Unmarshal(good, &enc); err != nil {
			t.Fatal(err)
		}
		raw := mustB64(t, enc.Encrypt)
		raw[len(raw)-17] ^= 1 // the padding byte of the last block changes
		flipped = []byte(`{"encrypt":"` + b64(raw) + `"}`)
	}
	reqs := map[string]*http.Request{
		"unsigned event":                  unsigned(good),
		"unsigned, bad padding":           unsigned(flipped),
		"unsigned, not base64":            unsigned([]byte(`{"encrypt":"!!"}`)),
		"unsigned, JSON inside":           unsigned(feishutest.Encrypted([]byte(`{"header":`), testKey)),
		"unsigned, not encrypted":         unsigned(groupMention("om_1")),
		"unsigned, not JSON":              unsigned([]byte(`{"encrypt":`)),
		"unsigned, wrong-token challenge": unsigned(feishutest.Encrypted(feishutest.Challenge("wrong", "c"), testKey)),
		"bad signature, good body":        badSig(good),
		"bad signature, bad padding":      badSig(flipped),
		"bad signature, not JSON":         badSig([]byte(`{"encrypt":`)),
		"stale":                           feishutest.Request(f.srv.URL+EventsPath, good, testKey, f.now.Add(-time.Hour)),
		"oversized":                       unsigned(bytes.Repeat([]byte("a"), channels.MaxWebhookBody+1)),
	}
	var first string
	for name, req := range reqs {
		status, body := f.do(t, req)
		got := fmt.Sprintf("%d %q", status, body)
		if first == "" {
			first = got
		}
		if got != first || status != http.StatusUnauthorized {
			t.Errorf("%s: answered %s; every unauthenticated request must get the same (%s)", name, got, first)
		}
	}
	if v := testutil.ToFloat64(f.m.MessagesRejected.WithLabelValues(Name, ReasonDecryptFailed)); v != 0 {
		t.Errorf("%v unauthenticated requests reached decryption failure", v)
	}
	if n := len(f.rec.messages()); n != 0 {
		t.Errorf("%d messages submitted", n)
	}
	// The unsigned challenge still works.
	status, body := f.do(t, unsigned(feishutest.Encrypted(feishutest.Challenge(testToken, "ok-1"), testKey)))
	if status != 200 || !strings.Contains(body, "ok-1") {
		t.Fatalf("challenge: %d %s", status, body)
	}
}

// TestFeishuTimestampStrictAndBounded: X-Lark-Request-Timestamp is plain
// decimal seconds within the window both ways. A timestamp ~292 years
// ahead (where a time.Duration overflows) is stale, and a signature made
// for one timestamp does not stay valid with digits moved between the
// timestamp and the nonce (the signed string concatenates them).
func TestFeishuTimestampStrictAndBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	now := f.now.Unix()
	body := feishutest.Encrypted(groupMention("om_ts"), testKey)
	send := func(ts, nonce string) int {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+EventsPath, bytes.NewReader(body))
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderNonce, nonce)
		req.Header.Set(HeaderSignature, feishutest.Signature(ts, nonce, testKey, body))
		status, _ := f.do(t, req)
		return status
	}
	nowS := strconv.FormatInt(now, 10)
	for _, ts := range []string{
		strconv.FormatInt(now+292*366*24*3600, 10), // past the time.Duration range
		strconv.FormatInt(now+(math.MaxInt64/int64(time.Second))+now, 10),
		strconv.FormatInt(math.MaxInt64, 10), "-" + strconv.FormatInt(math.MaxInt64, 10) + "8",
		strconv.FormatInt(now+301, 10), strconv.FormatInt(now-301, 10),
		"+" + nowS, " " + nowS, nowS + " ", "0" + nowS, nowS + ".0", "1e9", "0x" + strconv.FormatInt(now, 16), "",
	} {
		if status := send(ts, "n1"); status != http.StatusUnauthorized {
			t.Errorf("timestamp %q accepted (%d)", ts, status)
		}
	}
	// Digits moved across the boundary keep the signed string (ts+nonce)
	// the same, so the signature verifies; the timestamp must not.
	nonce := "7" + "123"
	sig := feishutest.Signature(nowS, nonce, testKey, body)
	for _, pair := range [][2]string{{nowS + "7", "123"}, {nowS[:9], nowS[9:] + nonce}} {
		if feishutest.Signature(pair[0], pair[1], testKey, body) != sig {
			t.Fatal("test setup: the signed string changed")
		}
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+EventsPath, bytes.NewReader(body))
		req.Header.Set(HeaderTimestamp, pair[0])
		req.Header.Set(HeaderNonce, pair[1])
		req.Header.Set(HeaderSignature, sig)
		if status, _ := f.do(t, req); status != http.StatusUnauthorized {
			t.Errorf("timestamp %q nonce %q (digits moved) accepted: %d", pair[0], pair[1], status)
		}
	}
	if n := len(f.rec.messages()); n != 0 {
		t.Fatalf("%d messages submitted", n)
	}
	for _, ts := range []string{nowS, strconv.FormatInt(now-299, 10), strconv.FormatInt(now+299, 10)} {
		if status := send(ts, "n-"+ts); status != 200 {
			t.Errorf("fresh timestamp %q refused (%d)", ts, status)
		}
	}
}
