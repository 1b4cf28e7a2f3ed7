package agent

import (
	"context"
	"log/slog"
)

// withAttrs is logger with attrs added, as logger.With(attrs...) would,
// except that the attrs are handed to the handler only when a line is
// written. slog's text and JSON handlers format the attrs of With at once,
// which every turn paid for the few lines a turn that goes well writes
// (none at the default level).
func withAttrs(logger *slog.Logger, attrs ...slog.Attr) *slog.Logger {
	return slog.New(deferredAttrs{h: logger.Handler(), attrs: attrs})
}

// deferredAttrs is a handler whose attrs are added to its handler's when
// it is used.
type deferredAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (d deferredAttrs) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, l) }

func (d deferredAttrs) Handle(ctx context.Context, r slog.Record) error {
	return d.h.WithAttrs(d.attrs).Handle(ctx, r)
}

func (d deferredAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return d.h.WithAttrs(d.attrs).WithAttrs(attrs)
}

func (d deferredAttrs) WithGroup(name string) slog.Handler {
	return d.h.WithAttrs(d.attrs).WithGroup(name)
}
