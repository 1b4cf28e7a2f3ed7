package wxcrypto

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"time"
)

// Envelope is the outer XML of an encrypted callback. Only Encrypt is
// signed; the other fields are informational.
type Envelope struct {
	ToUserName string `xml:"ToUserName"`
	AgentID    string `xml:"AgentID"`
	Encrypt    string `xml:"Encrypt"`
}

// Message is a callback's message or event, as the platforms send it (in
// plaintext mode the body itself, else the decrypted Encrypt). Fields a
// message type does not use are empty.
type Message struct {
	ToUserName   string `xml:"ToUserName"`   // the corpid or the account's original id
	FromUserName string `xml:"FromUserName"` // the member's UserID or the user's OpenID
	CreateTime   int64  `xml:"CreateTime"`
	MsgType      string `xml:"MsgType"` // text, image, voice, video, location, link, event
	Content      string `xml:"Content"`
	MsgID        string `xml:"MsgId"`   // 64-bit; absent on events
	AgentID      string `xml:"AgentID"` // WeCom apps
	PicURL       string `xml:"PicUrl"`
	MediaID      string `xml:"MediaId"`
	Format       string `xml:"Format"`
	// Recognition is the platform's transcript of a voice message, when
	// the account has speech recognition.
	Recognition string `xml:"Recognition"`
	Event       string `xml:"Event"` // subscribe, enter_agent, …
	EventKey    string `xml:"EventKey"`
	// Encrypt is set in an Official Account's compatible and safe modes.
	Encrypt string `xml:"Encrypt"`
}

// document reads the root element <xml> into v, refusing anything else:
// a field named twice (encoding/xml would keep the last), and anything but
// whitespace and comments after </xml> (which it would leave unread).
func document(raw []byte, v any) error {
	if err := checkShape(raw); err != nil {
		return err
	}
	dec := xml.NewDecoder(bytes.NewReader(raw))
	dec.Strict = true // and no CharsetReader: a charset other than UTF-8 is an error
	start, err := firstElement(dec)
	if err != nil {
		return err
	}
	if start.Name.Local != "xml" {
		return refuse(ReasonBadRequest, "root element is not <xml>")
	}
	if err := dec.DecodeElement(v, &start); err != nil {
		return refuse(ReasonBadRequest, "malformed XML")
	}
	return nil
}

// checkShape refuses a document whose root names a child element twice,
// or that goes on after the root element ends.
func checkShape(raw []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(raw))
	dec.Strict = true
	if _, err := firstElement(dec); err != nil {
		return err
	}
	seen := map[string]bool{}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return refuse(ReasonBadRequest, "malformed XML")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 1 {
				if seen[t.Name.Local] {
					return refuse(ReasonBadRequest, "element <"+t.Name.Local+"> appears twice")
				}
				seen[t.Name.Local] = true
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refuse(ReasonBadRequest, "malformed XML after the root element")
		}
		switch t := tok.(type) {
		case xml.Comment:
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return refuse(ReasonBadRequest, "text after the root element")
			}
		default:
			return refuse(ReasonBadRequest, "content after the root element")
		}
	}
}

// firstElement skips the prolog (declaration, comments, whitespace).
func firstElement(dec *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := dec.Token()
		if err != nil {
			return xml.StartElement{}, refuse(ReasonBadRequest, "malformed XML")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return xml.StartElement{}, refuse(ReasonBadRequest, "text before the root element")
			}
		case xml.Directive:
			// A DOCTYPE: no entities are ever needed here.
			return xml.StartElement{}, refuse(ReasonBadRequest, "directive in a callback")
		}
	}
}

// ParseEnvelope reads an encrypted callback's outer XML. A body without
// Encrypt is refused.
func ParseEnvelope(raw []byte) (Envelope, error) {
	var e Envelope
	if err := document(raw, &e); err != nil {
		return Envelope{}, err
	}
	if e.Encrypt == "" {
		return Envelope{}, refuse(ReasonBadRequest, "no Encrypt element")
	}
	return e, nil
}

// ParseMessage reads a message or event. One without a sender or a type
// is refused.
func ParseMessage(raw []byte) (Message, error) {
	var m Message
	if err := document(raw, &m); err != nil {
		return Message{}, err
	}
	if m.FromUserName == "" || m.MsgType == "" {
		return Message{}, refuse(ReasonBadRequest, "message without FromUserName or MsgType")
	}
	return m, nil
}

// cdata marks the fields of a reply written as CDATA, as the platforms
// write theirs.
type cdata struct {
	Text string `xml:",cdata"`
}

// TextReply is the XML of a passive text reply to a message: to the
// message's sender, from the message's recipient.
func TextReply(to, from string, at time.Time, content string) []byte {
	type reply struct {
		XMLName      xml.Name `xml:"xml"`
		ToUserName   cdata    `xml:"ToUserName"`
		FromUserName cdata    `xml:"FromUserName"`
		CreateTime   int64    `xml:"CreateTime"`
		MsgType      cdata    `xml:"MsgType"`
		Content      cdata    `xml:"Content"`
	}
	out, _ := xml.Marshal(reply{
		ToUserName: cdata{to}, FromUserName: cdata{from}, CreateTime: at.Unix(),
		MsgType: cdata{"text"}, Content: cdata{content},
	})
	return out
}

// SealReply encrypts a passive reply for a safe- or compatible-mode
// callback: the ciphertext, its msg_signature, timestamp and nonce.
func (c *Crypter) SealReply(reply []byte, at time.Time, nonce string) ([]byte, error) {
	enc, err := c.Encrypt(reply)
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	type sealed struct {
		XMLName      xml.Name `xml:"xml"`
		Encrypt      cdata    `xml:"Encrypt"`
		MsgSignature cdata    `xml:"MsgSignature"`
		TimeStamp    string   `xml:"TimeStamp"`
		Nonce        cdata    `xml:"Nonce"`
	}
	return xml.Marshal(sealed{Encrypt: cdata{enc}, MsgSignature: cdata{c.Sign(ts, nonce, enc)}, TimeStamp: ts, Nonce: cdata{nonce}})
}

// OpenReply is the inverse of SealReply, as the platform checks a reply:
// the signature over the ciphertext, then the ciphertext. Tests and fakes
// use it.
func (c *Crypter) OpenReply(raw []byte) (Message, error) {
	var s struct {
		Encrypt      string `xml:"Encrypt"`
		MsgSignature string `xml:"MsgSignature"`
		TimeStamp    string `xml:"TimeStamp"`
		Nonce        string `xml:"Nonce"`
	}
	if err := document(raw, &s); err != nil {
		return Message{}, err
	}
	if !c.Verify(s.MsgSignature, s.TimeStamp, s.Nonce, s.Encrypt) {
		return Message{}, refuse(ReasonBadSignature, "reply signature does not match")
	}
	plain, err := c.Decrypt(s.Encrypt)
	if err != nil {
		return Message{}, err
	}
	return ParseReply(plain)
}

// ParseReply reads a passive reply's XML (the platform's side of it).
func ParseReply(raw []byte) (Message, error) {
	var m Message
	if err := document(raw, &m); err != nil {
		return Message{}, err
	}
	return m, nil
}
