package wxcrypto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The official WXBizMsgCrypt sample: one account, a URL check (GET) and a
// message (POST).
const (
	vectorToken     = "QDG6eK"
	vectorKey       = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	vectorReceiveID = "wx5823bf96d3bd56c7"

	vectorGetTimestamp = "1409659589"
	vectorGetNonce     = "263014780"
	vectorEchoStr      = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
	vectorGetSignature = "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
	vectorEchoPlain    = "1616140317555161061"

	vectorPostTimestamp = "1409659813"
	vectorPostNonce     = "1372623149"
	vectorPostSignature = "477715d11cdb4164915debcba66cb864d751f3e6"
	vectorPostEncrypt   = "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
)

var vectorPostBody = []byte("<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName>\n<Encrypt><![CDATA[" +
	vectorPostEncrypt + "]]></Encrypt>\n<AgentID><![CDATA[218]]></AgentID>\n</xml>")

func vectorCrypter(t testing.TB) *Crypter {
	t.Helper()
	c, err := New(vectorToken, vectorKey, vectorReceiveID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func unix(ts string) time.Time {
	n, _ := strconv.ParseInt(ts, 10, 64)
	return time.Unix(n, 0)
}

func TestOfficialVectorURLCheck(t *testing.T) {
	c := vectorCrypter(t)
	if got := c.Sign(vectorGetTimestamp, vectorGetNonce, vectorEchoStr); got != vectorGetSignature {
		t.Fatalf("signature = %s, want %s", got, vectorGetSignature)
	}
	q, err := ParseQuery(url.Values{"msg_signature": {vectorGetSignature}, "timestamp": {vectorGetTimestamp},
		"nonce": {vectorGetNonce}, "echostr": {vectorEchoStr}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.OpenEcho(q, unix(vectorGetTimestamp).Add(time.Minute), DefaultWindow)
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != vectorEchoPlain {
		t.Fatalf("echostr = %q, want %q", plain, vectorEchoPlain)
	}
}

func TestOfficialVectorMessage(t *testing.T) {
	c := vectorCrypter(t)
	q := Query{MsgSignature: vectorPostSignature, Timestamp: vectorPostTimestamp, Nonce: vectorPostNonce}
	m, err := c.OpenMessage(q, vectorPostBody, unix(vectorPostTimestamp), DefaultWindow)
	if err != nil {
		t.Fatal(err)
	}
	want := Message{ToUserName: vectorReceiveID, FromUserName: "mycreate", CreateTime: 1409659813, MsgType: "text",
		Content: "hello", MsgID: "4561255354251345929", AgentID: "218"}
	if m != want {
		t.Fatalf("message = %+v\nwant      %+v", m, want)
	}
}

// A message sealed here opens there: a passive reply as the platform reads
// it, and a callback as Parley reads it, both under the official key.
func TestRoundTrip(t *testing.T) {
	c := vectorCrypter(t)
	at := time.Unix(1409659813, 0)
	reply := TextReply("mycreate", vectorReceiveID, at, "你好 ]]> <b>&amp;")
	sealed, err := c.SealReply(reply, at, "1372623149")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.OpenReply(sealed)
	if err != nil {
		t.Fatalf("%v\n%s", err, sealed)
	}
	if got.Content != "你好 ]]> <b>&amp;" || got.ToUserName != "mycreate" || got.FromUserName != vectorReceiveID || got.MsgType != "text" || got.CreateTime != at.Unix() {
		t.Fatalf("reply = %+v", got)
	}

	msg := []byte("<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName>" +
		"<CreateTime>1409659813</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[round trip]]></Content>" +
		"<MsgId>42</MsgId><AgentID>1000002</AgentID></xml>")
	enc, err := c.Encrypt(msg)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("<xml><ToUserName><![CDATA[x]]></ToUserName><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>")
	q := Query{MsgSignature: c.Sign("1409659813", "n1", enc), Timestamp: "1409659813", Nonce: "n1"}
	m, err := c.OpenMessage(q, body, at, DefaultWindow)
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != "round trip" || m.MsgID != "42" || m.FromUserName != "zhangsan" {
		t.Fatalf("message = %+v", m)
	}
}

// EncryptWith with the sample's own random prefix reproduces the sample's
// ciphertext: the padding and framing match the platform's byte for byte.
func TestEncryptReproducesTheVector(t *testing.T) {
	c := vectorCrypter(t)
	raw, _ := base64.StdEncoding.DecodeString(vectorEchoStr)
	msg, err := c.Decrypt(vectorEchoStr)
	if err != nil {
		t.Fatal(err)
	}
	// Recover the random prefix by decrypting the first block.
	var random [randomLength]byte
	full := decryptRaw(t, c, raw)
	copy(random[:], full[:randomLength])
	got, err := c.EncryptWith(random, msg)
	if err != nil {
		t.Fatal(err)
	}
	if got != vectorEchoStr {
		t.Fatalf("ciphertext = %s\nwant         %s", got, vectorEchoStr)
	}
}

// Every way a callback can be wrong is ErrRefused, with a reason of its
// own for the operator.
func TestRefusals(t *testing.T) {
	c := vectorCrypter(t)
	now := unix(vectorPostTimestamp)
	other, err := New(vectorToken, vectorKey, "wx-another-account")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Encrypt([]byte("<xml><FromUserName>u</FromUserName><MsgType>text</MsgType></xml>"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := []byte(vectorPostEncrypt)
	corrupt[40] ^= 1
	flipped := string(corrupt)
	signed := func(enc string) (Query, []byte) {
		body := []byte("<xml><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>")
		return Query{MsgSignature: c.Sign(vectorPostTimestamp, vectorPostNonce, enc), Timestamp: vectorPostTimestamp, Nonce: vectorPostNonce}, body
	}
	good := Query{MsgSignature: vectorPostSignature, Timestamp: vectorPostTimestamp, Nonce: vectorPostNonce}
	tests := []struct {
		name   string
		query  Query
		body   []byte
		now    time.Time
		reason string
	}{
		{"forged signature", Query{MsgSignature: strings.Repeat("0", 40), Timestamp: vectorPostTimestamp, Nonce: vectorPostNonce}, vectorPostBody, now, ReasonBadSignature},
		{"signature of another nonce", Query{MsgSignature: vectorPostSignature, Timestamp: vectorPostTimestamp, Nonce: "1"}, vectorPostBody, now, ReasonBadSignature},
		{"stale timestamp", good, vectorPostBody, now.Add(DefaultWindow + time.Second), ReasonStaleTimestamp},
		{"future timestamp", good, vectorPostBody, now.Add(-DefaultWindow - time.Second), ReasonStaleTimestamp},
		{"timestamp not a number", Query{MsgSignature: vectorPostSignature, Timestamp: "1409659813.0", Nonce: vectorPostNonce}, vectorPostBody, now, ReasonStaleTimestamp},
		{"wrong receive id", first(signed(foreign)), second(signed(foreign)), now, ReasonWrongReceiver},
		{"corrupt ciphertext", first(signed(flipped)), second(signed(flipped)), now, ReasonDecryptFailed},
		{"ciphertext not base64", first(signed("***")), second(signed("***")), now, ReasonDecryptFailed},
		{"ciphertext not whole blocks", first(signed("AAAA")), second(signed("AAAA")), now, ReasonDecryptFailed},
		{"no Encrypt", good, []byte("<xml><ToUserName>x</ToUserName></xml>"), now, ReasonBadRequest},
		{"not XML", good, []byte("{\"encrypt\":\"x\"}"), now, ReasonBadRequest},
		{"a DOCTYPE", good, []byte(`<!DOCTYPE xml [<!ENTITY a "b">]><xml><Encrypt>&a;</Encrypt></xml>`), now, ReasonBadRequest},
		{"another root", good, []byte("<root><Encrypt>x</Encrypt></root>"), now, ReasonBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.OpenMessage(tt.query, tt.body, tt.now, DefaultWindow)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v, want ErrRefused", err)
			}
			if got := Reason(err); got != tt.reason {
				t.Fatalf("reason = %s (%v), want %s", got, err, tt.reason)
			}
			for _, secret := range []string{vectorToken, vectorKey} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

func first(q Query, _ []byte) Query   { return q }
func second(_ Query, b []byte) []byte { return b }

// Timestamps at the edges of int64 and of the window never overflow into
// acceptance.
func TestFreshWithoutOverflow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		ts   string
		want bool
	}{
		{"1700000000", true},
		{strconv.FormatInt(now.Add(DefaultWindow).Unix(), 10), true},
		{strconv.FormatInt(now.Add(-DefaultWindow).Unix(), 10), true},
		{strconv.FormatInt(now.Add(DefaultWindow).Unix()+1, 10), false},
		{strconv.FormatInt(math.MaxInt64, 10), false},
		{strconv.FormatInt(math.MinInt64, 10), false},
		{"9223372036854775808", false}, // MaxInt64+1
		{"-1", false},
		{"", false},
		{"0x10", false},
	} {
		if got := Fresh(tt.ts, now, DefaultWindow) == nil; got != tt.want {
			t.Errorf("Fresh(%q) = %v, want %v", tt.ts, got, tt.want)
		}
	}
}

func TestPaddingIsStrict(t *testing.T) {
	c := vectorCrypter(t)
	raw, _ := base64.StdEncoding.DecodeString(vectorEchoStr)
	full := decryptRaw(t, c, raw)
	n := int(full[len(full)-1])
	for _, tt := range []struct {
		name string
		edit func(p []byte)
	}{
		{"a padding byte changed", func(p []byte) { p[len(p)-n] ^= 1 }},
		{"padding of 0", func(p []byte) { p[len(p)-1] = 0 }},
		{"padding of 33", func(p []byte) { p[len(p)-1] = 33 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := bytes.Clone(full)
			tt.edit(p)
			enc := encryptRaw(t, c, p)
			if _, err := c.Decrypt(enc); Reason(err) != ReasonDecryptFailed {
				t.Fatalf("Decrypt = %v, want a decrypt_failed refusal", err)
			}
		})
	}
}

func TestNewChecksTheKey(t *testing.T) {
	for _, key := range []string{"short", vectorKey + "A", strings.Repeat("*", KeyLength)} {
		if _, err := New("t", key, ""); err == nil {
			t.Errorf("New accepted the key %q", key)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	if _, err := New("", vectorKey, ""); err == nil {
		t.Error("New accepted an empty token")
	}
	c, err := New("t", "", "")
	if err != nil || c.Encrypts() {
		t.Fatalf("a Crypter without a key: %v, encrypts %v", err, c.Encrypts())
	}
	if _, err := c.Decrypt(vectorEchoStr); err == nil {
		t.Fatal("a Crypter without a key decrypted")
	}
}

func TestParseQueryBoundsParameters(t *testing.T) {
	if _, err := ParseQuery(url.Values{"nonce": {strings.Repeat("n", MaxParam+1)}}); !errors.Is(err, ErrRefused) {
		t.Fatalf("an oversized nonce: %v", err)
	}
}
