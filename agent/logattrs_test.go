package agent

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
)

// TestWithAttrsWritesWhatWithWrites: lines through withAttrs read as
// through slog's With, also after further attrs and groups.
func TestWithAttrsWritesWhatWithWrites(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"a line", func(l *slog.Logger) { l.Info("turn answered", "iterations", 2) }},
		{"more attrs", func(l *slog.Logger) { l.With("tool", "clock").Warn("tool failed", "err", "boom") }},
		{"a group", func(l *slog.Logger) { l.WithGroup("call").Error("not run", "tool", "clock") }},
		{"below the level", func(l *slog.Logger) { l.Debug("not written") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eager, deferred bytes.Buffer
			newLogger := func(b *bytes.Buffer) *slog.Logger {
				return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{
					ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
						if a.Key == slog.TimeKey {
							return slog.Attr{}
						}
						return a
					}})).With("component", "agent")
			}
			tt.log(newLogger(&eager).With("channel", "slack", "conversation", "c1"))
			tt.log(withAttrs(newLogger(&deferred), slog.String("channel", "slack"), slog.String("conversation", "c1")))
			if eager.String() != deferred.String() {
				t.Fatalf("withAttrs wrote\n%q\nWith wrote\n%q", deferred.String(), eager.String())
			}
		})
	}
}

// attrCounter is a handler that counts the attrs handed to WithAttrs.
type attrCounter struct {
	slog.Handler
	added *int
}

func (c attrCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	*c.added += len(attrs)
	return attrCounter{Handler: c.Handler.WithAttrs(attrs), added: c.added}
}

// TestATurnThatLogsNothingFormatsNoAttrs: a turn that writes no line at
// the logger's level hands its handler no attrs to format.
func TestATurnThatLogsNothingFormatsNoAttrs(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	added := 0
	h.agent.log = slog.New(attrCounter{Handler: slog.NewTextHandler(&bytes.Buffer{}, nil), added: &added})
	if res := h.run(t, TurnRequest{Channel: "slack", Conversation: "c1", UserText: "hi"}); res.Failed {
		t.Fatalf("result = %+v", res)
	}
	if added != 0 {
		t.Fatalf("a turn that logged nothing handed its handler %d attrs to format", added)
	}
	if !h.agent.log.Handler().Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("the test's logger writes nothing at all")
	}
}
