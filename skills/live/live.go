// Package live runs the skill library of a process: it opens the three
// layers and the skill state, reloads them here and on every replica
// sharing the Redis, serves the state from memory while following the
// changes others announce, and keeps the skill gauges current.
//
// It sits above agent (the gauges count the index the agent shows) and
// below cmd/parley, which only opens a Library, starts it and stops it.
package live

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/builtin"
	"github.com/redis/go-redis/v9"
)

// Options say where the library and its state are.
type Options struct {
	// Home and Workspace are the user and workspace layers' roots.
	Home, Workspace string
	// Index pins skills into the index (skills.index).
	Index []string
	// Redis, when set, keeps the state and carries the reload
	// announcements between replicas; nil keeps the state in
	// Home/skills.json and reloads this process only.
	Redis  redis.UniversalClient
	Prefix string // redis.prefix
	// Metrics gets the skill gauges and reload counts; nil keeps none.
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Library is the skill library of a running process. Open it, Start its
// watchers, Stop them.
type Library struct {
	// Registry holds the current catalog; State what is off and trusted.
	Registry *skills.Registry
	State    skills.State

	redis   redis.UniversalClient
	prefix  string
	metrics *metrics.Metrics
	log     *slog.Logger

	stop     context.CancelFunc
	watchers sync.WaitGroup
}

// Open loads the three layers and the skill state: in Redis when
// o.Redis is set, else Home/skills.json. It starts nothing.
func Open(o Options) (*Library, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	reg, err := skills.NewRegistry(skills.Layers{Builtin: builtin.FS, Home: o.Home, Workspace: o.Workspace})
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	for _, name := range o.Index {
		if _, ok := reg.Catalog().Get(name); !ok {
			o.Log.Warn("skills.index names a skill no layer has", "skill", name)
		}
	}
	// Configuration only: the index is the same in every process with
	// these skills and this configuration, whatever the load counts.
	reg.SetIndexOrder(skills.IndexOrder{Pinned: o.Index})
	l := &Library{Registry: reg, redis: o.Redis, prefix: o.Prefix, metrics: o.Metrics, log: o.Log}
	if o.Redis != nil {
		l.State = skills.NewRedisState(o.Redis, o.Prefix)
		return l, nil
	}
	st, warns := skills.OpenFileState(o.Home)
	for _, w := range warns {
		o.Log.Warn("skills state: " + w.String())
	}
	l.State = st
	return l, nil
}

// BotSkills is the bot-wide skill set of the current catalog: every
// enabled skill, trusted as the state says, before channel policies and a
// conversation's tools narrow it (those only make the index smaller). The
// gauges, the start-up line and `parley skills list` count its index, the
// one the system prompt holds. An error reading the disabled list comes
// with a set that treats every skill as enabled.
func (l *Library) BotSkills(ctx context.Context) (*agent.SkillSet, error) {
	disabled, err := l.State.Disabled(ctx)
	set := &agent.SkillSet{Catalog: l.Registry.Catalog(), Disabled: disabled, Trusted: func(s *skills.Skill) bool {
		ok, err := l.State.Trusted(ctx, s.Path, s.SHA256)
		if err != nil {
			l.log.Debug("skills: cannot read trust; counting the skill as untrusted", "skill", s.Name, "err", err)
		}
		return ok
	}}
	if err != nil {
		return set, fmt.Errorf("skills: read the disabled list: %w", err)
	}
	return set, nil
}

// Start sets the gauges and, with Redis, follows the reloads and the
// state changes other replicas and the CLI announce, until Stop. It
// returns once the watchers are subscribed.
func (l *Library) Start(ctx context.Context) {
	l.Observe(ctx)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = cancel
	l.watchReloads(bg)
	l.watchState(bg)
}

// Stop ends the watchers Start began and waits for them.
func (l *Library) Stop() {
	if l.stop != nil {
		l.stop()
	}
	l.watchers.Wait()
}

// Reload reloads here, then announces it so every replica reloads.
func (l *Library) Reload(ctx context.Context) (*skills.Catalog, error) {
	c, err := l.Registry.Reload()
	l.countReload(err)
	if err != nil {
		return nil, err
	}
	l.Observe(ctx)
	if l.redis != nil {
		if err := skills.AnnounceReload(ctx, l.redis, l.prefix); err != nil {
			l.log.Warn("skills reloaded here, but the other replicas were not told", "err", err)
		}
	}
	return c, nil
}

func (l *Library) countReload(err error) {
	if l.metrics == nil {
		return
	}
	outcome := metrics.OutcomeOK
	if err != nil {
		outcome = metrics.OutcomeError
	}
	l.metrics.SkillReloads.WithLabelValues(outcome).Inc()
}

// watchReloads follows reloads announced by other replicas until ctx ends.
func (l *Library) watchReloads(ctx context.Context) {
	if l.redis == nil {
		return
	}
	ready := make(chan struct{})
	l.watchers.Go(func() {
		err := skills.WatchReloads(ctx, l.redis, l.prefix, l.Registry, l.log, ready, func(_ *skills.Catalog, err error) {
			l.countReload(err)
			l.Observe(ctx)
		})
		if err != nil {
			l.log.Warn("skills: not following reloads from other replicas", "err", err)
		}
	})
	<-ready
}

// stateRefresh is how often a replica re-reads the skill state in case it
// missed the announcement of a change.
const stateRefresh = 10 * time.Second

// watchState serves the skill state of turns from memory, following the
// changes other replicas and the CLI announce, until ctx ends.
func (l *Library) watchState(ctx context.Context) {
	rs, ok := l.State.(*skills.RedisState)
	if !ok {
		return
	}
	ready := make(chan struct{})
	l.watchers.Go(func() {
		if err := rs.Watch(ctx, stateRefresh, l.log, ready); err != nil {
			l.log.Warn("skills: reading the skill state from Redis on every turn", "err", err)
		}
	})
	<-ready
}

// counts is what the skill gauges and the start-up line report.
type counts struct {
	known      map[[2]string]int // (source, state) → skills
	total      int
	enabled    int
	indexed    int // skills listed in the bot-wide index
	leftOut    int // indexable skills the index has no room for
	indexBytes int
}

// count reads the current catalog and state. The index counted is the
// bot-wide one (BotSkills).
func (l *Library) count(ctx context.Context) counts {
	set, err := l.BotSkills(ctx)
	if err != nil {
		l.log.Debug("skills: cannot read the disabled list for the metrics", "err", err)
	}
	n := counts{known: map[[2]string]int{}, total: set.Catalog.Len()}
	for _, s := range set.Catalog.All() {
		state := "enabled"
		if set.Disabled[s.Name] {
			state = "disabled"
		} else {
			n.enabled++
		}
		n.known[[2]string{string(s.Source), state}]++
	}
	index, _ := set.Index()
	n.indexBytes = len(index)
	listed, leftOut := set.IndexListing()
	n.indexed, n.leftOut = len(listed), len(leftOut)
	return n
}

// sources and states bound the labels of parley_skills; every pair is
// set, to 0 when no skill has it, so a series never lingers.
var (
	sources = []skills.Source{skills.SourceBuiltin, skills.SourceUser, skills.SourceWorkspace}
	states  = []string{"enabled", "disabled"}
)

// Observe sets the skill gauges from the current catalog and state. It
// runs at start, after each reload and before each scrape, so the gauges
// are right before the first turn and after `skills off` from anywhere.
// Each series is set, never reset, so a scrape running at the same time
// never sees a half-counted state.
func (l *Library) Observe(ctx context.Context) {
	if l.metrics == nil {
		return
	}
	n := l.count(ctx)
	for _, src := range sources {
		for _, state := range states {
			l.metrics.SkillsKnown.WithLabelValues(string(src), state).Set(float64(n.known[[2]string{string(src), state}]))
		}
	}
	l.metrics.SkillIndexBytes.Set(float64(n.indexBytes))
}

// LogLoaded is the start-up report of the skills: one line of counts,
// however large the library (`parley skills list` shows each).
func (l *Library) LogLoaded(ctx context.Context) {
	n := l.count(ctx)
	c := l.Registry.Catalog()
	l.log.Info("skills loaded", "skills", n.total, "enabled", n.enabled, "indexed", n.indexed,
		"left_out_of_index", n.leftOut, "index_bytes", n.indexBytes,
		"warnings", len(c.Warnings()), "skipped", len(c.Skipped()), "details", "parley skills list")
}
