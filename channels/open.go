package channels

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/metrics"
)

// Opener is implemented by every platform's section of the configuration
// (the type its config.Platform registers, e.g. *slack.Config): `parley
// serve` calls Open on each section and runs what it returns, so the
// binary names no platform. Check it at compile time in the adapter:
//
//	var _ channels.Opener = (*Config)(nil)
type Opener interface {
	// Open builds the platform's adapter from the section and deps. It
	// returns nil, nil when the section turns nothing on, and an error
	// when the platform refuses the credentials (a refused token) — a
	// platform that is merely unreachable is not an error; its Run keeps
	// trying. Open may make network calls, each bounded by a timeout of its
	// own as well as by ctx.
	Open(ctx context.Context, deps Deps) (Channel, error)
}

// Deps is what the process shares with every adapter it opens.
type Deps struct {
	// Handler is the gateway, for webhooks that arrive before Run.
	Handler Handler
	// Redis is the store's client: the shared Redis, or the embedded one
	// of a single in-memory replica. Never nil.
	Redis redis.UniversalClient
	// Shared reports that Redis is shared with other replicas (REDIS_URL
	// is set); state that must survive a restart of a single replica
	// lives in Home otherwise.
	Shared bool
	// Prefix starts every Redis key.
	Prefix string
	// HistoryTTL is how long a conversation lives; what an adapter keeps
	// about one (a followed thread) lives as long.
	HistoryTTL time.Duration
	// Conns is how many requests to one host may run at once (the
	// gateway's workers): the size of an adapter's connection pool (see
	// outbound.Client).
	Conns int
	// Home is $PARLEY_HOME.
	Home    string
	Metrics *metrics.Metrics
	// Log is the process's logger; the adapter adds its component.
	Log *slog.Logger
	// DMMatters reports whether the access rules in m's scope treat a
	// direct message differently from a chat message (nil: assume they
	// do). An adapter that must ask its platform which a message is can
	// skip asking when they do not.
	DMMatters func(m Message) bool
}

// AccountsOpener is implemented by a platform's section that can
// configure several accounts (apps) of its platform (slack.accounts.NAME):
// `parley serve` calls OpenAccounts instead of Open and runs one adapter
// per account, each implementing Accounted. It returns no adapter when the
// section turns nothing on. An account whose credentials the platform
// refuses at start-up may be returned down (its Health says so) rather
// than failing the others.
type AccountsOpener interface {
	OpenAccounts(ctx context.Context, deps Deps) ([]Channel, error)
}
