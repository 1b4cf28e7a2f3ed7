package wechattest

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
)

// Platform plays the platform's side of callbacks for one account: it
// signs, encrypts and posts them as WeCom and WeChat do, and opens the
// passive replies it gets back.
type Platform struct {
	Crypter *wxcrypto.Crypter
	// Now is the clock of the timestamps it signs (default time.Now).
	Now   func() time.Time
	nonce atomic.Int64
}

// NewPlatform returns the platform side of an account with this token,
// EncodingAESKey (empty: plaintext mode) and receive id.
func NewPlatform(t testing.TB, token, encodingAESKey, receiveID string) *Platform {
	t.Helper()
	c, err := wxcrypto.New(token, encodingAESKey, receiveID)
	if err != nil {
		t.Fatal(err)
	}
	return &Platform{Crypter: c, Now: time.Now}
}

func (p *Platform) stamp() (ts, nonce string) {
	return strconv.FormatInt(p.Now().Unix(), 10), strconv.FormatInt(1_000_000+p.nonce.Add(1), 10)
}

// Inbound is a message the platform delivers.
type Inbound struct {
	To, From    string // ToUserName (corpid / original id), FromUserName
	MsgType     string // text (default), image, voice, event, …
	Content     string
	MsgID       string
	AgentID     string
	Event       string
	Recognition string
	PicURL      string
	MediaID     string
	At          time.Time // CreateTime; default Now
}

// XML is the message as the platform writes it.
func (p *Platform) XML(in Inbound) []byte {
	if in.MsgType == "" {
		in.MsgType = "text"
	}
	if in.At.IsZero() {
		in.At = p.Now()
	}
	var b strings.Builder
	b.WriteString("<xml>")
	field := func(name, v string) {
		if v != "" {
			b.WriteString("<" + name + "><![CDATA[" + v + "]]></" + name + ">")
		}
	}
	field("ToUserName", in.To)
	field("FromUserName", in.From)
	b.WriteString("<CreateTime>" + strconv.FormatInt(in.At.Unix(), 10) + "</CreateTime>")
	field("MsgType", in.MsgType)
	field("Content", in.Content)
	field("PicUrl", in.PicURL)
	field("MediaId", in.MediaID)
	field("Recognition", in.Recognition)
	field("Event", in.Event)
	if in.MsgID != "" {
		b.WriteString("<MsgId>" + in.MsgID + "</MsgId>")
	}
	if in.AgentID != "" {
		b.WriteString("<AgentID>" + in.AgentID + "</AgentID>")
	}
	b.WriteString("</xml>")
	return []byte(b.String())
}

// Request is one callback, ready to post (again, for a retry).
type Request struct {
	Query url.Values
	Body  []byte
}

// Encrypted is an encrypted callback (WeCom apps; Official Accounts in
// safe mode when oa is set, which adds the plain signature and
// encrypt_type=aes as WeChat does).
func (p *Platform) Encrypted(t testing.TB, in Inbound, oa bool) Request {
	t.Helper()
	enc, err := p.Crypter.Encrypt(p.XML(in))
	if err != nil {
		t.Fatal(err)
	}
	ts, nonce := p.stamp()
	q := url.Values{"msg_signature": {p.Crypter.Sign(ts, nonce, enc)}, "timestamp": {ts}, "nonce": {nonce}}
	if oa {
		q.Set("signature", p.Crypter.Sign(ts, nonce, ""))
		q.Set("encrypt_type", "aes")
		q.Set("openid", in.From)
	}
	body := "<xml><ToUserName><![CDATA[" + in.To + "]]></ToUserName><Encrypt><![CDATA[" + enc + "]]></Encrypt>"
	if in.AgentID != "" {
		body += "<AgentID><![CDATA[" + in.AgentID + "]]></AgentID>"
	}
	return Request{Query: q, Body: []byte(body + "</xml>")}
}

// Plain is an Official Account callback in plaintext mode.
func (p *Platform) Plain(in Inbound) Request {
	ts, nonce := p.stamp()
	q := url.Values{"signature": {p.Crypter.Sign(ts, nonce, "")}, "timestamp": {ts}, "nonce": {nonce}, "openid": {in.From}}
	return Request{Query: q, Body: p.XML(in)}
}

// Compatible is an Official Account callback in compatible mode: the
// plaintext fields and their encryption side by side.
func (p *Platform) Compatible(t testing.TB, in Inbound) Request {
	t.Helper()
	r := p.Encrypted(t, in, true)
	plain := p.XML(in)
	enc := string(r.Body[strings.Index(string(r.Body), "<Encrypt>"):strings.Index(string(r.Body), "</xml>")])
	r.Body = append(bytes.TrimSuffix(plain, []byte("</xml>")), []byte(enc+"</xml>")...)
	return r
}

// WeComURLCheck is the GET WeCom sends when the callback URL is saved: an
// encrypted echostr that must come back decrypted.
func (p *Platform) WeComURLCheck(t testing.TB, echo string) url.Values {
	t.Helper()
	enc, err := p.Crypter.Encrypt([]byte(echo))
	if err != nil {
		t.Fatal(err)
	}
	ts, nonce := p.stamp()
	return url.Values{"msg_signature": {p.Crypter.Sign(ts, nonce, enc)}, "timestamp": {ts}, "nonce": {nonce}, "echostr": {enc}}
}

// OAURLCheck is the GET WeChat sends when an Official Account's server URL
// is saved: a plain signature and an echostr to return as it is.
func (p *Platform) OAURLCheck(echo string) url.Values {
	ts, nonce := p.stamp()
	return url.Values{"signature": {p.Crypter.Sign(ts, nonce, "")}, "timestamp": {ts}, "nonce": {nonce}, "echostr": {echo}}
}

// Answer is the HTTP answer to a callback.
type Answer struct {
	Status int
	Body   []byte
}

// Post delivers r to url (the callback URL of one replica) and returns
// the answer.
func Post(t testing.TB, base string, r Request) Answer {
	t.Helper()
	resp, err := http.Post(base+"?"+r.Query.Encode(), "text/xml", bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Body: body}
}

// Get sends a URL check to base.
func Get(t testing.TB, base string, q url.Values) Answer {
	t.Helper()
	resp, err := http.Get(base + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Body: body}
}

// Reply reads a passive reply as the platform does: "" or "success" is no
// reply (ok false); an encrypted one is checked and opened.
func (p *Platform) Reply(t testing.TB, a Answer) (wxcrypto.Message, bool) {
	t.Helper()
	body := bytes.TrimSpace(a.Body)
	if a.Status != http.StatusOK {
		t.Fatalf("callback answered HTTP %d: %s", a.Status, body)
	}
	if len(body) == 0 || string(body) == "success" {
		return wxcrypto.Message{}, false
	}
	var probe struct {
		Encrypt string `xml:"Encrypt"`
	}
	if err := xml.Unmarshal(body, &probe); err == nil && probe.Encrypt != "" {
		m, err := p.Crypter.OpenReply(body)
		if err != nil {
			t.Fatalf("the encrypted reply does not open: %v\n%s", err, body)
		}
		return m, true
	}
	m, err := wxcrypto.ParseReply(body)
	if err != nil {
		t.Fatalf("the reply is not XML: %v\n%s", err, body)
	}
	return m, true
}

// PostStalled starts a POST to rawURL that announces a body of n bytes,
// sends only part of it and stalls, as a slow or hostile client would. It
// returns the status the server answered with (0 when it closed the
// connection without an answer), or fails the test if the server is still
// waiting after 20 s.
func PostStalled(t testing.TB, rawURL string, n int, part []byte) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, n)
	_, _ = conn.Write(part)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var nerr net.Error
	switch {
	case errors.As(err, &nerr) && nerr.Timeout():
		t.Fatal("the server still waits for a stalled body after 20 s")
	case err != nil:
		return 0 // closed without an answer
	}
	resp.Body.Close()
	return resp.StatusCode
}
