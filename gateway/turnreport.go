package gateway

// What a finished turn reports beyond its reply: the one log line an
// operator tails, the turn's duration, and the apology for a delayed
// answer, said once however often the message is retried.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/tracing"
)

// logTurn says, in one line an operator tailing the log reads as the
// traffic, that a model turn was answered and written: where, how long it
// took, how it went and what it cost. Nothing of what was said.
func logTurn(ctx context.Context, log *slog.Logger, conversation string, r result) {
	if !r.turn {
		return
	}
	log.LogAttrs(ctx, slog.LevelInfo, "turn answered", slog.String("channel", r.channel),
		slog.String("conversation", sessions.ShownKey(conversation)), slog.Duration("duration", time.Since(r.start)),
		slog.String("outcome", r.outcome), slog.Int("tokens", r.tokens))
}

// observe records a model turn's duration, from its start to now.
func observe(ctx context.Context, m *metrics.Metrics, r result, outcome string) {
	if !r.turn {
		return
	}
	tracing.Observe(ctx, m.TurnDuration.WithLabelValues(r.channel, outcome), time.Since(r.start).Seconds())
}

// apologies remembers the messages whose users were told that their answer
// is delayed, so that a message retried many times is apologised for once.
type apologies struct {
	mu   sync.Mutex
	told map[string]time.Time
}

// apologyMemory is how long a delayed message's apology is remembered.
const apologyMemory = time.Hour

// first reports whether nonce's user has not been told yet, and records
// that they are now.
func (a *apologies) first(nonce string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.told == nil {
		a.told = map[string]time.Time{}
	}
	now := time.Now()
	for k, at := range a.told {
		if now.Sub(at) > apologyMemory {
			delete(a.told, k)
		}
	}
	if _, ok := a.told[nonce]; ok {
		return false
	}
	a.told[nonce] = now
	return true
}

// forget drops nonce once its turn is written.
func (a *apologies) forget(nonce string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.told, nonce)
}
