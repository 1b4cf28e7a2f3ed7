package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
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
	mux.Handle("POST "+EventsPath, a)
}

// ServeHTTP is the HTTP callback. Everything is checked before the body is
// parsed as an event; a refusal is counted by reason and reaches nothing.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := channels.ReadBody(r, channels.MaxWebhookBody)
	if err != nil {
		if errors.Is(err, channels.ErrBodyTooLarge) {
			a.reject(w, ReasonTooLarge, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		a.reject(w, ReasonBadRequest, http.StatusBadRequest, "cannot read body")
		return
	}
	if !a.cfg.VerificationToken.IsSet() && !a.cfg.EncryptKey.IsSet() {
		a.reject(w, ReasonBadToken, http.StatusForbidden, "callbacks are not configured")
		return
	}

	// With an Encrypt Key every event is signed; only the challenge comes
	// unsigned (its authenticity is the key that decrypts it).
	signed := false
	if a.cfg.EncryptKey.IsSet() {
		sig := r.Header.Get(HeaderSignature)
		ts := r.Header.Get(HeaderTimestamp)
		if sig != "" || ts != "" {
			if reason, ok := a.fresh(ts); !ok {
				a.reject(w, reason, http.StatusUnauthorized, "stale or missing timestamp")
				return
			}
			if !validSignature(sig, ts, r.Header.Get(HeaderNonce), a.cfg.EncryptKey.Reveal(), body) {
				a.reject(w, ReasonBadSignature, http.StatusUnauthorized, "bad signature")
				return
			}
			signed = true
		}
	}

	plain := body
	if a.cfg.EncryptKey.IsSet() {
		var enc struct {
			Encrypt *string `json:"encrypt"`
		}
		if err := json.Unmarshal(body, &enc); err != nil {
			a.reject(w, ReasonBadRequest, http.StatusBadRequest, "malformed JSON")
			return
		}
		if enc.Encrypt == nil {
			a.reject(w, ReasonBadRequest, http.StatusBadRequest, "an encrypt key is configured but the body is not encrypted")
			return
		}
		plain, err = Decrypt(*enc.Encrypt, a.cfg.EncryptKey.Reveal())
		if err != nil {
			a.reject(w, ReasonDecryptFailed, http.StatusBadRequest, "cannot decrypt")
			return
		}
	}
	var env envelope
	if err := json.Unmarshal(plain, &env); err != nil {
		a.reject(w, ReasonBadRequest, http.StatusBadRequest, "malformed JSON")
		return
	}
	if env.Encrypt != nil {
		// Encrypted although no key is configured here (or twice).
		a.reject(w, ReasonDecryptFailed, http.StatusBadRequest, "encrypted event but no encrypt key is configured")
		return
	}
	token := env.Token
	if env.Header != nil {
		token = env.Header.Token
	}
	if a.cfg.VerificationToken.IsSet() && !sameSecret(token, a.cfg.VerificationToken.Reveal()) {
		a.reject(w, ReasonBadToken, http.StatusUnauthorized, "bad verification token")
		return
	}

	if env.Type == "url_verification" {
		// Answered at once: no lookup, no queue.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": env.Challenge})
		return
	}
	if a.cfg.EncryptKey.IsSet() && !signed {
		a.reject(w, ReasonBadSignature, http.StatusUnauthorized, "missing signature")
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

	// Ack fast: only the queueing happens before the answer; the turn runs
	// after it. A failure to queue answers 500 so Feishu pushes it again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.opts.SubmitTimeout)
	defer cancel()
	if err := a.dispatch(ctx, plain); err != nil {
		if errors.Is(err, errNoHandler) {
			a.reject(w, ReasonUnavailable, http.StatusServiceUnavailable, "not ready")
			return
		}
		a.log.Error("event not accepted; Feishu will push it again", "event_id", env.Header.EventID, "err", err)
		http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
		return
	}
	writeOK(w)
}

// fresh checks X-Lark-Request-Timestamp (seconds) against the clock.
func (a *Adapter) fresh(ts string) (string, bool) {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ReasonStaleTimestamp, false
	}
	d := a.opts.Now().Sub(time.Unix(sec, 0))
	if d < 0 {
		d = -d
	}
	return ReasonStaleTimestamp, d <= a.opts.MaxSkew
}

func (a *Adapter) reject(w http.ResponseWriter, reason string, status int, msg string) {
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.log.Warn("callback refused", "reason", reason, "detail", msg)
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
