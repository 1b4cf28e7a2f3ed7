// Package webhook is the trigger of inbound webhooks: POST /hooks/NAME on
// the webhook listener, for triggers.webhooks.NAME. An Alertmanager
// (version 4) or Grafana alerting notification, or any JSON body rendered
// by a template, becomes a post in its destination chat, and with answer:
// agent a triage turn in the same thread.
//
// A request is authenticated first (a bearer token, or an HMAC-SHA256
// signature of the body within a 5-minute window): without it nothing is
// posted. A notification is identified by its group, status and alerts,
// and the first request of it within the webhook's dedup_window claims it
// in Redis; an HA peer's copy, or a retry, is answered 200 and dropped.
// The sender is answered 200 only once the work is queued durably (the
// gateway's inbox in Redis); a failure releases the claim and answers 503,
// so the sender tries again and nothing is lost. Each alert group is
// answered in one thread of its chat (triggers.Work's Group).
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/triggers"
	"github.com/redis/go-redis/v9"
)

// Request bounds and headers.
const (
	MaxBody         = 1 << 20 // bytes of one request's body
	SignatureHeader = "X-Parley-Signature"
	TimestampHeader = "X-Parley-Timestamp"
	// SignatureWindow is how far a signed request's timestamp may be from
	// now.
	SignatureWindow = 5 * time.Minute
)

// Options are what a Server needs. Redis, Submitter and Metrics are
// required.
type Options struct {
	Webhooks  Webhooks // validated
	Submitter triggers.Submitter
	Redis     redis.UniversalClient
	Prefix    string
	Metrics   *metrics.Metrics
	Log       *slog.Logger // nil discards
	Now       func() time.Time
}

// Server serves every configured webhook.
type Server struct {
	opts Options
	log  *slog.Logger
}

// New returns a Server for opts.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	names := make([]string, 0, len(opts.Webhooks))
	for name := range opts.Webhooks {
		names = append(names, name)
	}
	opts.Metrics.PrimeTriggers(names...)
	return &Server{opts: opts, log: log.With("component", "webhook")}
}

// Mount adds POST /hooks/{name} to mux.
func (s *Server) Mount(mux *http.ServeMux) { mux.Handle("POST /hooks/{name}", s) }

// refusal is a request answered without posting: its status, outcome and
// reason (logged, and told the sender: it names nothing secret).
type refusal struct {
	status  int
	outcome string
	reason  string
}

func (r *refusal) Error() string { return r.reason }

// ServeHTTP answers one request to a webhook.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	hook, ok := s.opts.Webhooks[name]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	log := s.log.With("webhook", name)
	outcome, err := s.serve(r.Context(), name, hook, r)
	var ref *refusal
	switch {
	case errors.As(err, &ref):
		log.WarnContext(r.Context(), "webhook request refused", "outcome", ref.outcome, "reason", ref.reason)
		s.record(r.Context(), name, ref.outcome)
		http.Error(rw, ref.reason, ref.status)
	case err != nil:
		log.ErrorContext(r.Context(), "webhook request not queued; the sender is asked to try again", "err", err)
		s.record(r.Context(), name, "error")
		http.Error(rw, "not queued; try again", http.StatusServiceUnavailable)
	default:
		s.record(r.Context(), name, outcome)
		rw.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(rw, outcome+"\n")
	}
}

// serve authenticates, decodes, routes, de-duplicates and submits one
// request, returning its outcome.
func (s *Server) serve(ctx context.Context, name string, hook *Webhook, r *http.Request) (string, error) {
	if hook.Token.IsSet() && !s.bearerOK(hook, r) {
		return "", s.refuse(name, http.StatusUnauthorized, metrics.TriggerUnauthorized, "a valid bearer token is required")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	if err != nil {
		return "", s.refuse(name, http.StatusRequestEntityTooLarge, metrics.TriggerInvalid, "the body is over 1 MiB or could not be read")
	}
	if hook.HMACSecret.IsSet() {
		if err := s.signatureOK(hook, r, body); err != nil {
			return "", s.refuse(name, http.StatusUnauthorized, metrics.TriggerUnauthorized, err.Error())
		}
	}
	w, labels, err := build(name, hook, body)
	if err != nil {
		return "", s.refuse(name, http.StatusBadRequest, metrics.TriggerInvalid, err.Error())
	}
	to, ok := hook.destination(labels)
	if !ok {
		return "", s.refuse(name, http.StatusUnprocessableEntity, metrics.TriggerUnrouted, "no route matches and the webhook has no default destination")
	}
	w.To = to
	return s.submit(ctx, name, hook, w)
}

// refuse counts a refusal.
func (s *Server) refuse(name string, status int, outcome, reason string) error {
	s.opts.Metrics.TriggerRequests.WithLabelValues(name, outcome).Inc()
	return &refusal{status: status, outcome: outcome, reason: reason}
}

// bearerOK compares the request's bearer token in constant time.
func (s *Server) bearerOK(hook *Webhook, r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(hook.Token.Reveal())) == 1
}

// Sign is the X-Parley-Signature of body sent at ts with secret:
// "sha256=" and the hex HMAC-SHA256 of "TS.BODY".
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", ts)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// signatureOK checks the body's signature and its timestamp's window.
func (s *Server) signatureOK(hook *Webhook, r *http.Request, body []byte) error {
	ts, err := strconv.ParseInt(r.Header.Get(TimestampHeader), 10, 64)
	if err != nil {
		return errors.New("a signed request needs " + TimestampHeader + " (Unix seconds)")
	}
	if d := s.opts.Now().Sub(time.Unix(ts, 0)); d > SignatureWindow || d < -SignatureWindow {
		return errors.New("the request's timestamp is outside the 5-minute window")
	}
	want := Sign(hook.HMACSecret.Reveal(), ts, body)
	if !hmac.Equal([]byte(r.Header.Get(SignatureHeader)), []byte(want)) {
		return errors.New("the signature does not match the body")
	}
	return nil
}

// submit claims the notification for the dedup window and queues its
// work; a failure to queue gives the claim back.
func (s *Server) submit(ctx context.Context, name string, hook *Webhook, w triggers.Work) (string, error) {
	key := s.opts.Prefix + "trigger-dedup:" + name + ":" + w.ID
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	claim := hex.EncodeToString(nonce[:])
	ok, err := s.opts.Redis.SetNX(ctx, key, claim, hook.DedupWindow).Result()
	if err != nil {
		return "", fmt.Errorf("webhook: claim a notification: %w", err)
	}
	if !ok {
		s.opts.Metrics.TriggerRequests.WithLabelValues(name, metrics.TriggerDuplicate).Inc()
		return metrics.TriggerDuplicate, nil
	}
	// The claim names this posting: the same notification after the
	// window is a repeat, posted again (in its group's thread).
	w.ID = name + ":" + w.ID + ":" + claim
	if err := s.opts.Submitter.SubmitWork(ctx, w); err != nil {
		if derr := s.opts.Redis.Del(context.WithoutCancel(ctx), key).Err(); derr != nil {
			err = errors.Join(err, fmt.Errorf("webhook: release the claim: %w", derr))
		}
		return "", err
	}
	s.opts.Metrics.TriggerRequests.WithLabelValues(name, metrics.TriggerPosted).Inc()
	return metrics.TriggerPosted, nil
}
