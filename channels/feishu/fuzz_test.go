package feishu

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzDecrypt: any "encrypt" field either decrypts or returns ErrDecrypt,
// never panics; what encrypt produced always decrypts back.
func FuzzDecrypt(f *testing.F) {
	f.Add("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "test key", []byte(`{"a":1}`))
	f.Add("", "", []byte{})
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "k", []byte("x"))
	f.Fuzz(func(t *testing.T, encrypted, key string, plain []byte) {
		if _, err := Decrypt(encrypted, key); err != nil && !errors.Is(err, ErrDecrypt) {
			t.Fatalf("Decrypt: unexpected error %v", err)
		}
		enc, err := encrypt(plain, key, bytes.Repeat([]byte{7}, 16))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decrypt(enc, key)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("round trip of %q: %q, %v", plain, got, err)
		}
	})
}

// FuzzCallbackEnvelope: any decrypted callback body parses into the
// envelope or fails cleanly, and the message text of any content is read
// without a panic.
func FuzzCallbackEnvelope(f *testing.F) {
	f.Add([]byte(`{"schema":"2.0","header":{"event_id":"e","event_type":"im.message.receive_v1","token":"t"},"event":{}}`), "text", `{"text":"@_user_1 hi"}`)
	f.Add([]byte(`{"type":"url_verification","challenge":"c","token":"t"}`), "post", `{"zh_cn":{"title":"t","content":[[{"tag":"text","text":"x"}]]}}`)
	f.Add([]byte(`{"encrypt":"x"}`), "image", `{}`)
	f.Fuzz(func(t *testing.T, body []byte, msgType, content string) {
		var env envelope
		_ = json.Unmarshal(body, &env)
		messageText(msgType, content, []mention{{key: "@_user_1", openID: "ou_bot", name: "bot"}}, "ou_bot")
	})
}

// FuzzTimestamp: X-Lark-Request-Timestamp is fresh only as the plain
// decimal seconds of a moment within the window.
func FuzzTimestamp(f *testing.F) {
	for _, s := range []string{"1700000000", "17000000001", "+1700000000", "01700000000", "9223372036854775807", "-1", "", "1e9"} {
		f.Add(s)
	}
	now := time.Unix(1_700_000_000, 0)
	a := &Adapter{opts: Options{Now: func() time.Time { return now }, MaxSkew: 5 * time.Minute}}
	f.Fuzz(func(t *testing.T, ts string) {
		if !a.fresh(ts) {
			return
		}
		var sec int64
		for _, c := range []byte(ts) {
			if c < '0' || c > '9' {
				t.Fatalf("%q accepted with a non-digit", ts)
			}
			sec = sec*10 + int64(c-'0')
		}
		if d := now.Unix() - sec; d > 300 || d < -300 || ts[0] == '0' {
			t.Fatalf("%q accepted, %d s away", ts, d)
		}
	})
}
