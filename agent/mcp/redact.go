package mcp

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// redacted replaces a secret in errors and logs.
const redacted = "<redacted>"

// minSecret is the shortest value redacted: replacing every "1" or "on" in
// a message would garble it and hide nothing.
const minSecret = 4

// A redactor removes a server's secrets from text: every value expanded
// from the environment, every header value and the URL's query values. It
// learns them at each connect, since that is when ${NAME} is expanded.
type redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret containing another goes whole
}

// add remembers secrets.
func (r *redactor) add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= minSecret && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// remember is add for one secret, in the shape expand wants.
func (r *redactor) remember(s string) { r.add(s) }

// addURL remembers the query values of a URL and their escaped forms, which
// is how they appear in url.Error messages.
func (r *redactor) addURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			r.add(v, url.QueryEscape(v))
		}
	}
}

// string returns s without any secret.
func (r *redactor) string(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, secret := range r.secrets {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, redacted)
		}
	}
	return s
}

// error returns err with its message redacted. The result still matches
// context errors with errors.Is, so that a timeout stays a timeout.
func (r *redactor) error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.string(err.Error())
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }

// Is keeps errors.Is working for the sentinel errors callers test for,
// without exposing the unredacted chain through Unwrap.
func (e redactedError) Is(target error) bool { return errors.Is(e.err, target) }

// redactHandler is a slog.Handler that redacts the message and every string
// or error attribute, so that nothing logged about a server (the SDK's own
// logs included) can carry its secrets.
type redactHandler struct {
	inner slog.Handler
	r     *redactor
}

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.string(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.string(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.string(err.Error()))
		}
		return slog.String(a.Key, h.r.string(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.attr(a)
	}
	return redactHandler{inner: h.inner.WithAttrs(out), r: h.r}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{inner: h.inner.WithGroup(name), r: h.r}
}
