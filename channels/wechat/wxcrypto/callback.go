package wxcrypto

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/parleyhq/parley/channels"
)

// MaxBody is the largest callback body read. The platforms' messages are a
// few kilobytes (a text message holds at most 2048 bytes); a larger body is
// refused unread.
const MaxBody = 64 << 10

// MaxParam bounds each query parameter: a signature is 40 characters, a
// timestamp 10, a nonce a few dozen, an echostr a few hundred.
const MaxParam = 1024

// DefaultWindow is how far a callback's timestamp may be from the clock.
// The platforms retry for about 15 seconds; five minutes absorbs clock
// skew while bounding how long a captured callback can be replayed (a
// replay inside it is refused by Replays unless it repeats the body, and
// then de-duplicated on its MsgId).
const DefaultWindow = 5 * time.Minute

// ErrRefused is every failed check of a callback. Answer it with
// WriteRefusal and nothing else.
var ErrRefused = errors.New("wxcrypto: callback refused")

// Reasons a callback is refused: the reason label of
// parley_messages_rejected_total. They are for the operator only.
const (
	ReasonBadSignature   = "bad_signature"
	ReasonStaleTimestamp = "stale_timestamp"
	ReasonDecryptFailed  = "decrypt_failed"
	ReasonWrongReceiver  = "wrong_receiver"
	ReasonBadRequest     = "bad_request"
)

// refusal is ErrRefused with its reason and a detail for the log.
type refusal struct {
	reason, detail string
}

func (e *refusal) Error() string { return ErrRefused.Error() + ": " + e.reason + ": " + e.detail }

func (e *refusal) Is(target error) bool { return target == ErrRefused }

func refuse(reason, detail string) error { return &refusal{reason: reason, detail: detail} }

// Reason is the reason of a refusal, ReasonBadRequest for any other error.
func Reason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return ReasonBadRequest
}

// WriteRefusal is the one answer to a refused callback, whatever the
// reason: the same status and body for a forged signature, a stale
// timestamp, a corrupt ciphertext or a wrong receive id.
func WriteRefusal(w http.ResponseWriter) {
	http.Error(w, "forbidden", http.StatusForbidden)
}

// Query is what a callback's URL carries.
type Query struct {
	// Signature signs token, timestamp and nonce (Official Accounts, in
	// every mode).
	Signature string
	// MsgSignature signs token, timestamp, nonce and the ciphertext
	// (encrypted callbacks).
	MsgSignature string
	Timestamp    string
	Nonce        string
	// EchoStr is the URL check's challenge: encrypted for WeCom, plain for
	// Official Accounts.
	EchoStr string
	// EncryptType is "aes" when an Official Account's body is encrypted
	// (compatible and safe modes), else empty or "raw".
	EncryptType string
}

// ParseQuery reads a callback's query. An oversized parameter is refused
// before anything is computed over it.
func ParseQuery(v url.Values) (Query, error) {
	q := Query{
		Signature: v.Get("signature"), MsgSignature: v.Get("msg_signature"),
		Timestamp: v.Get("timestamp"), Nonce: v.Get("nonce"),
		EchoStr: v.Get("echostr"), EncryptType: v.Get("encrypt_type"),
	}
	for _, p := range []string{q.Signature, q.MsgSignature, q.Timestamp, q.Nonce, q.EchoStr, q.EncryptType} {
		if len(p) > MaxParam {
			return Query{}, refuse(ReasonBadRequest, "query parameter too long")
		}
	}
	return q, nil
}

// Fresh checks that timestamp (Unix seconds) is within window of now. The
// bounds are computed on now, so no timestamp, however large or negative,
// overflows the comparison.
func Fresh(timestamp string, now time.Time, window time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return refuse(ReasonStaleTimestamp, "timestamp is not a number")
	}
	sec, slack := now.Unix(), int64(window/time.Second)
	if ts < sec-slack || ts > sec+slack {
		return refuse(ReasonStaleTimestamp, "timestamp outside the window")
	}
	return nil
}

// OpenEcho answers a WeCom URL check: the timestamp is fresh, msg_signature
// signs the echostr, and the echostr decrypts to the plaintext returned.
func (c *Crypter) OpenEcho(q Query, now time.Time, window time.Duration) ([]byte, error) {
	if err := Fresh(q.Timestamp, now, window); err != nil {
		return nil, err
	}
	if q.EchoStr == "" || !c.Verify(q.MsgSignature, q.Timestamp, q.Nonce, q.EchoStr) {
		return nil, refuse(ReasonBadSignature, "msg_signature does not sign the echostr")
	}
	return c.Decrypt(q.EchoStr)
}

// VerifyPlain checks an Official Account's plain signature (token,
// timestamp, nonce) and the timestamp.
func (c *Crypter) VerifyPlain(q Query, now time.Time, window time.Duration) error {
	if err := Fresh(q.Timestamp, now, window); err != nil {
		return err
	}
	if !c.Verify(q.Signature, q.Timestamp, q.Nonce, "") {
		return refuse(ReasonBadSignature, "signature does not match")
	}
	return nil
}

// OpenMessage opens an encrypted callback body: the envelope's Encrypt is
// signed by msg_signature, the timestamp is fresh, and the ciphertext
// decrypts, with the right receive id, to a message.
func (c *Crypter) OpenMessage(q Query, body []byte, now time.Time, window time.Duration) (Message, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return Message{}, err
	}
	if err := Fresh(q.Timestamp, now, window); err != nil {
		return Message{}, err
	}
	if !c.Verify(q.MsgSignature, q.Timestamp, q.Nonce, env.Encrypt) {
		return Message{}, refuse(ReasonBadSignature, "msg_signature does not sign the ciphertext")
	}
	plain, err := c.Decrypt(env.Encrypt)
	if err != nil {
		return Message{}, err
	}
	return ParseMessage(plain)
}

// DefaultBodyTimeout bounds how long a callback's body may take to arrive.
// The platforms send a few kilobytes at once; a client that trickles its
// body is cut off rather than holding a connection.
const DefaultBodyTimeout = 5 * time.Second

// ReadBody reads a callback's body: at most MaxBody bytes (else
// channels.ErrBodyTooLarge), arriving within timeout.
func ReadBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) ([]byte, error) {
	// Not every ResponseWriter can set deadlines (a test recorder); the
	// limit on the size still holds there.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	body, err := channels.ReadBody(r, MaxBody)
	if err != nil {
		// The connection is not reused: the server would otherwise wait
		// for the rest of the body before answering.
		w.Header().Set("Connection", "close")
		return nil, err
	}
	// Lifted once the body is in: an expired deadline would end the
	// request's context while the handler still waits for its answer.
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}
