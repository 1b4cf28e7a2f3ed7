package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/parleyhq/parley/channels"
)

// Reasons a callback is refused (the reason label of MessagesRejected).
const (
	ReasonTooLarge       = "too_large"
	ReasonBadSignature   = "bad_signature"
	ReasonStaleTimestamp = "stale_timestamp"
	ReasonBadToken       = "bad_token"
	ReasonDecryptFailed  = "decrypt_failed"
	ReasonBadRequest     = "bad_request"
	ReasonUnavailable    = "unavailable"
)

// Signature headers of HTTP callbacks.
const (
	HeaderTimestamp = "X-Lark-Request-Timestamp"
	HeaderNonce     = "X-Lark-Request-Nonce"
	HeaderSignature = "X-Lark-Signature"
)

// envelope is the part of a callback read before dispatch: the challenge
// (v1 shape) and the token of v1 and v2 events.
type envelope struct {
	Encrypt   *string `json:"encrypt"`
	Type      string  `json:"type"`
	Challenge string  `json:"challenge"`
	Token     string  `json:"token"`
	Schema    string  `json:"schema"`
	Header    *struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
		Token     string `json:"token"`
	} `json:"header"`
}

// Mount implements channels.HTTPChannel: POST /feishu/events.
func (a *Adapter) Mount(mux *http.ServeMux) {
	mux.Handle("POST "+a.route(EventsPath), a)
}

// refusedBody is the one answer to every request refused before it is
// authenticated: whatever failed (size, signature, timestamp, decryption,
// JSON, token), the status and body are the same, so the answers reveal
// nothing about a ciphertext or a key.
const refusedBody = "request refused"

// ServeHTTP is the HTTP callback. Everything is checked before the body is
// parsed as an event; a refusal is counted by reason and reaches nothing.
//
// With an Encrypt Key, a request with signature headers is authenticated
// (timestamp window, then signature) before anything is decrypted. Only
// the URL-verification challenge comes unsigned: an unsigned body is
// decrypted for it alone, and anything that is not a challenge with the
// right verification token gets the same refusal as every other
// unauthenticated request.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readCallback(w, r)
	if !ok {
		return
	}
	signed, ok := a.checkSignature(w, r, body)
	if !ok {
		return
	}
	plain, env, ok := a.openEnvelope(w, body, signed)
	if !ok {
		return
	}
	if env.Type == "url_verification" {
		// Answered at once: no lookup, no queue.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": env.Challenge})
		return
	}
	if a.cfg.EncryptKey.IsSet() && !signed {
		a.refuse(w, ReasonBadSignature)
		return
	}
	if env.Header == nil || env.Header.EventType == "" {
		if env.Schema == "" && env.Type == "event_callback" {
			// A v1 event: nothing Parley subscribes to. Ack so it is not re-pushed.
			writeOK(w)
			return
		}
		a.reject(w, ReasonBadRequest, http.StatusBadRequest, "not an event")
		return
	}
	if env.Header.EventType == EventCardAction {
		a.serveCardAction(w, r, plain)
		return
	}
	a.serveEvent(w, r, env, plain)
}

// readCallback reads a POST's body, refusing anything else, and any
// request when neither a verification token nor an Encrypt Key is set.
func (a *Adapter) readCallback(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := channels.ReadBody(r, channels.MaxWebhookBody)
	if err != nil {
		if errors.Is(err, channels.ErrBodyTooLarge) {
			a.refuse(w, ReasonTooLarge)
			return nil, false
		}
		a.refuse(w, ReasonBadRequest)
		return nil, false
	}
	if !a.cfg.VerificationToken.IsSet() && !a.cfg.EncryptKey.IsSet() {
		a.refuse(w, ReasonBadToken)
		return nil, false
	}
	return body, true
}

// checkSignature authenticates a request with signature headers when an
// Encrypt Key is set: timestamp window, then signature. It reports
// whether the request was signed, and false in ok once refused.
func (a *Adapter) checkSignature(w http.ResponseWriter, r *http.Request, body []byte) (signed, ok bool) {
	if !a.cfg.EncryptKey.IsSet() {
		return false, true
	}
	sig, ts, nonce := r.Header.Get(HeaderSignature), r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderNonce)
	if sig == "" && ts == "" && nonce == "" {
		return false, true
	}
	if !a.fresh(ts) {
		a.refuse(w, ReasonStaleTimestamp)
		return false, false
	}
	if !validSignature(sig, ts, nonce, a.cfg.EncryptKey.Reveal(), body) {
		a.refuse(w, ReasonBadSignature)
		return false, false
	}
	return true, true
}

// openEnvelope decrypts the body when an Encrypt Key is set and decodes
// the envelope, checking its verification token.
func (a *Adapter) openEnvelope(w http.ResponseWriter, body []byte, signed bool) ([]byte, envelope, bool) {
	plain := body
	if a.cfg.EncryptKey.IsSet() {
		var enc struct {
			Encrypt *string `json:"encrypt"`
		}
		if err := json.Unmarshal(body, &enc); err != nil || enc.Encrypt == nil {
			a.refuseAfter(w, signed, ReasonBadRequest, http.StatusBadRequest, "the body is not an encrypted event")
			return nil, envelope{}, false
		}
		var err error
		if plain, err = Decrypt(*enc.Encrypt, a.cfg.EncryptKey.Reveal()); err != nil {
			a.refuseAfter(w, signed, ReasonDecryptFailed, http.StatusBadRequest, "cannot decrypt")
			return nil, envelope{}, false
		}
	}
	var env envelope
	if err := json.Unmarshal(plain, &env); err != nil {
		a.refuseAfter(w, signed, ReasonBadRequest, http.StatusBadRequest, "malformed JSON")
		return nil, envelope{}, false
	}
	if env.Encrypt != nil {
		// Encrypted although no key is configured here (or twice).
		a.refuseAfter(w, signed, ReasonDecryptFailed, http.StatusBadRequest, "encrypted event but no encrypt key is configured")
		return nil, envelope{}, false
	}
	token := env.Token
	if env.Header != nil {
		token = env.Header.Token
	}
	if a.cfg.VerificationToken.IsSet() && !sameSecret(token, a.cfg.VerificationToken.Reveal()) {
		a.refuse(w, ReasonBadToken)
		return nil, envelope{}, false
	}
	return plain, env, true
}

// serveEvent queues an authenticated event. Ack fast: only the queueing
// happens before the answer; the turn runs after it. A failure to queue
// answers 500 so Feishu pushes it again.
func (a *Adapter) serveEvent(w http.ResponseWriter, r *http.Request, env envelope, plain []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.opts.SubmitTimeout)
	defer cancel()
	if err := a.dispatch(ctx, plain); err != nil {
		if errors.Is(err, errNoHandler) {
			a.reject(w, ReasonUnavailable, http.StatusServiceUnavailable, "not ready")
			return
		}
		if errors.Is(err, errMalformedEvent) {
			a.reject(w, ReasonBadRequest, http.StatusBadRequest, "malformed event")
			return
		}
		a.log.Error("event not accepted; Feishu will push it again", "event_id", env.Header.EventID, "err", err)
		http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
		return
	}
	writeOK(w)
}

// maxTimestampDigits bounds X-Lark-Request-Timestamp: seconds since 1970
// have 10 digits until the year 2286.
const maxTimestampDigits = 10

// fresh checks X-Lark-Request-Timestamp (seconds) against the clock: only
// plain decimal digits, no sign, no leading zero, at most
// maxTimestampDigits, and within MaxSkew of now in either direction. The
// bounds keep the arithmetic far from overflow, and since the signature
// concatenates timestamp and nonce without a separator, moving a digit
// between them changes the timestamp's length and so its value tenfold,
// far outside the window.
func (a *Adapter) fresh(ts string) bool {
	if ts == "" || len(ts) > maxTimestampDigits || ts[0] == '0' {
		return false
	}
	var sec int64
	for i := 0; i < len(ts); i++ {
		c := ts[i]
		if c < '0' || c > '9' {
			return false
		}
		sec = sec*10 + int64(c-'0')
	}
	skew := int64(a.opts.MaxSkew / time.Second)
	diff := a.opts.Now().Unix() - sec
	return diff <= skew && diff >= -skew
}

// refuse answers a request refused before it is authenticated: counted by
// reason, logged (rate-limited), always the same status and body.
func (a *Adapter) refuse(w http.ResponseWriter, reason string) {
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.refusals.Log(context.Background(), a.log, slog.LevelWarn, reason, Name, "callback refused", "reason", reason)
	http.Error(w, refusedBody, http.StatusUnauthorized)
}

// refuseAfter refuses a request that failed after the signature check: a
// signed one gets a precise answer (it comes from Feishu), an unsigned one
// the refusal every unauthenticated request gets — counted as unsigned when
// a key is set, since only a challenge may come without a signature.
func (a *Adapter) refuseAfter(w http.ResponseWriter, signed bool, reason string, status int, msg string) {
	if !signed {
		if a.cfg.EncryptKey.IsSet() {
			reason = ReasonBadSignature
		}
		a.refuse(w, reason)
		return
	}
	a.reject(w, reason, status, msg)
}

func (a *Adapter) reject(w http.ResponseWriter, reason string, status int, msg string) {
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.refusals.Log(context.Background(), a.log, slog.LevelWarn, reason, Name, "callback refused", "reason", reason, "detail", msg)
	http.Error(w, msg, status)
}

func writeOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"msg":"success"}` + "\n"))
}

// isJSONObject is a cheap pre-check of a WebSocket payload.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 1 && b[0] == '{'
}
