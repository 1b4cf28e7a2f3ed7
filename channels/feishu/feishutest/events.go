package feishutest

// The events and callback bodies a test sends to the code under test, built
// the way Feishu builds them.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Mention is one @ in a message.
type Mention struct {
	Key    string // @_user_1
	OpenID string
	Name   string
}

// Message describes an im.message.receive_v1 event.
type Message struct {
	EventID   string // default "ev_" + MessageID
	Token     string // header.token
	TenantKey string // default "tenant1"
	MessageID string
	RootID    string
	ParentID  string
	ThreadID  string
	ChatID    string
	ChatType  string // p2p, group, topic_group
	Sender    string // open_id
	MsgType   string // default text
	Content   string // JSON string; see Text
	Mentions  []Mention
}

// Text is the content of a text message.
func Text(s string) string {
	b, _ := json.Marshal(map[string]string{"text": s})
	return string(b)
}

// Event renders m as a schema 2.0 event.
func Event(m Message) []byte {
	if m.EventID == "" {
		m.EventID = "ev_" + m.MessageID
	}
	if m.TenantKey == "" {
		m.TenantKey = "tenant1"
	}
	if m.MsgType == "" {
		m.MsgType = "text"
	}
	var mentions []map[string]any
	for _, mn := range m.Mentions {
		mentions = append(mentions, map[string]any{"key": mn.Key, "name": mn.Name, "tenant_key": m.TenantKey,
			"id": map[string]string{"open_id": mn.OpenID, "union_id": "on_" + mn.OpenID, "user_id": ""}})
	}
	msg := map[string]any{
		"message_id": m.MessageID, "chat_id": m.ChatID, "chat_type": m.ChatType, "message_type": m.MsgType,
		"content": m.Content, "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
	for k, v := range map[string]string{"root_id": m.RootID, "parent_id": m.ParentID, "thread_id": m.ThreadID} {
		if v != "" {
			msg[k] = v
		}
	}
	if mentions != nil {
		msg["mentions"] = mentions
	}
	ev := map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": m.EventID, "event_type": "im.message.receive_v1", "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"token": m.Token, "app_id": "cli_test", "tenant_key": m.TenantKey},
		"event": map[string]any{
			"sender":  map[string]any{"sender_id": map[string]string{"open_id": m.Sender, "union_id": "on_" + m.Sender}, "sender_type": "user", "tenant_key": m.TenantKey},
			"message": msg,
		},
	}
	b, _ := json.Marshal(ev)
	return b
}

// Challenge is a url_verification body.
func Challenge(token, challenge string) []byte {
	b, _ := json.Marshal(map[string]string{"challenge": challenge, "token": token, "type": "url_verification"})
	return b
}

// Encrypted wraps plain as {"encrypt": …} under encryptKey the way Feishu
// does: AES-256-CBC with key SHA-256(encryptKey), a random IV prepended,
// PKCS#7 padding, base64. (Written independently of package feishu, so
// the two check each other.)
func Encrypted(plain []byte, encryptKey string) []byte {
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	data := append(append([]byte(nil), plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(data))
	_, _ = rand.Read(out[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], data)
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(out)})
	return b
}

// Signature is X-Lark-Signature over body.
func Signature(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.Sum256([]byte(timestamp + nonce + encryptKey + string(body)))
	return hex.EncodeToString(h[:])
}

// Request builds the callback POST to url, signed at ts when encryptKey is
// set (an empty encryptKey sends no signature headers).
func Request(url string, body []byte, encryptKey string, ts time.Time) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if encryptKey != "" {
		sec := strconv.FormatInt(ts.Unix(), 10)
		nonce := fmt.Sprintf("n%d", ts.UnixNano())
		req.Header.Set("X-Lark-Request-Timestamp", sec)
		req.Header.Set("X-Lark-Request-Nonce", nonce)
		req.Header.Set("X-Lark-Signature", Signature(sec, nonce, encryptKey, body))
	}
	return req
}
