package wxcrypto

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// The parsers face the internet: whatever arrives, they return a message
// or ErrRefused, never panic, and what they accept survives a round trip.

func FuzzDecrypt(f *testing.F) {
	c := vectorCrypter(f)
	f.Add(vectorEchoStr)
	f.Add(vectorPostEncrypt)
	f.Add("")
	f.Add("AAAA")
	f.Add("P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ")
	f.Fuzz(func(t *testing.T, enc string) {
		msg, err := c.Decrypt(enc)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Decrypt = %v, not a refusal", err)
			}
			return
		}
		again, err := c.Encrypt(msg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.Decrypt(again)
		if err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("round trip of %q: %q, %v", msg, back, err)
		}
	})
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add(vectorPostBody)
	f.Add([]byte("<xml><Encrypt>x</Encrypt></xml>"))
	f.Add([]byte(`<?xml version="1.0" encoding="UTF-8"?><xml><Encrypt><![CDATA[a]]></Encrypt><AgentID>1</AgentID></xml>`))
	f.Add([]byte(`<?xml version="1.0" encoding="GBK"?><xml><Encrypt>x</Encrypt></xml>`))
	f.Add([]byte(`<!DOCTYPE x [<!ENTITY e "e">]><xml><Encrypt>&e;</Encrypt></xml>`))
	f.Add([]byte("<xml><Encrypt>"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := ParseEnvelope(raw)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("ParseEnvelope = %v, not a refusal", err)
			}
			return
		}
		if e.Encrypt == "" {
			t.Fatal("an envelope without Encrypt was accepted")
		}
	})
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName>\n<FromUserName><![CDATA[mycreate]]></FromUserName>\n" +
		"<CreateTime>1409659813</CreateTime>\n<MsgType><![CDATA[text]]></MsgType>\n<Content><![CDATA[hello]]></Content>\n" +
		"<MsgId>4561255354251345929</MsgId>\n<AgentID>218</AgentID>\n</xml>"))
	f.Add([]byte("<xml><FromUserName>u</FromUserName><MsgType>event</MsgType><Event>enter_agent</Event><CreateTime>99999999999999999999</CreateTime></xml>"))
	f.Add([]byte("<xml><FromUserName>u</FromUserName><MsgType>voice</MsgType><Recognition>你好</Recognition></xml>"))
	f.Add([]byte("<xml><FromUserName>u</FromUserName><MsgType>text</MsgType><Content>a]]&gt;b</Content><Content>again</Content></xml>"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseMessage(raw)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("ParseMessage = %v, not a refusal", err)
			}
			return
		}
		if m.FromUserName == "" || m.MsgType == "" {
			t.Fatalf("accepted %+v", m)
		}
		// A reply built from what was read is itself readable.
		if _, err := ParseReply(TextReply(m.FromUserName, m.ToUserName, time.Unix(m.CreateTime, 0), m.Content)); err != nil {
			t.Fatalf("reply to %+v: %v", m, err)
		}
	})
}

// FuzzOpenMessage feeds whole callbacks, signed or not, through the checks
// in the order a request meets them.
func FuzzOpenMessage(f *testing.F) {
	c := vectorCrypter(f)
	f.Add(vectorPostSignature, vectorPostTimestamp, vectorPostNonce, vectorPostBody)
	f.Add(vectorPostSignature, "99999999999999999999", vectorPostNonce, vectorPostBody)
	f.Add("", "", "", []byte(""))
	f.Fuzz(func(t *testing.T, sig, ts, nonce string, body []byte) {
		_, err := c.OpenMessage(Query{MsgSignature: sig, Timestamp: ts, Nonce: nonce}, body, unix(vectorPostTimestamp), DefaultWindow)
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Fatalf("OpenMessage = %v, not a refusal", err)
		}
	})
}
