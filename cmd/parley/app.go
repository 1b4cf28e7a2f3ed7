package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/media"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/gateway/quota"
	tokenusage "github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/builtin"
	"github.com/parleyhq/parley/tracing"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// app is everything one process wires together.
type app struct {
	cfg     config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	store   *sessions.RedisStore
	shared  bool // store is a real Redis shared with other replicas
	agent   *agent.Agent
	tools   *agent.Registry
	toolset *toolset // the tools' registry and the MCP servers
	policy  *policy.Resolver
	skills  *skills.Registry
	state   skills.State
	gateway *gateway.Gateway
	redis   *sessions.Health

	// Background work (reload announcements, Redis health) runs under bg
	// until the teardown cancels it and waits.
	bg       context.Context
	watchers sync.WaitGroup

	channels []channels.Channel

	// lifecycle holds the teardown of every step set up so far; close
	// runs it.
	lifecycle
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	// Lines logged within a traced turn carry its trace_id and span_id.
	if cfg.Log.Format == "json" {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
}

// openStore connects to REDIS_URL, or starts the in-memory store.
func (e *environment) openStore(cfg config.Config, log *slog.Logger) (*sessions.RedisStore, bool, error) {
	opts := sessions.Options{
		Prefix:      cfg.Redis.Prefix,
		HistoryTTL:  cfg.Sessions.HistoryTTL,
		MaxMessages: cfg.Sessions.MaxMessages,
		LockTTL:     cfg.Sessions.LockTTL,
	}
	if cfg.Redis.URL == "" {
		log.Warn("REDIS_URL is not set: using the in-memory store, which keeps conversations in this process only — run one replica, and expect a restart to forget everything")
		s, err := sessions.NewMemory(opts)
		return s, false, err
	}
	// A connection for each worker's command and one for what its turn
	// starts beside it (the lock's renewal, the outbox), and one for each
	// webhook being handled.
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 2*cfg.Gateway.Workers+cfg.Server.MaxConcurrentBodies)
	if err != nil {
		return nil, false, err
	}
	return sessions.NewRedis(client, opts), true, nil
}

// logSkillWarnings reports the problems found loading the skills: one line
// counting them (a large library has hundreds, and a chat run is no place
// to list them), or each one when verbose.
func logSkillWarnings(log *slog.Logger, c *skills.Catalog, verbose bool) {
	warns := c.Warnings()
	if len(warns) == 0 {
		return
	}
	if verbose {
		for _, w := range warns {
			log.Warn("skills: " + w.String())
		}
		return
	}
	log.Warn(fmt.Sprintf("skills: %s while loading (%s); `parley skills list --verbose` shows them",
		plural(len(warns), "warning"), plural(len(c.Skipped()), "skill")+" skipped"))
}

// plural renders "1 skill", "2 skills".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// openSkills loads the three skill layers and the skill state: in Redis
// when Redis is configured, else $PARLEY_HOME/skills.json.
func openSkills(cfg config.Config, client redis.UniversalClient, log *slog.Logger) (*skills.Registry, skills.State, error) {
	reg, err := skills.NewRegistry(skills.Layers{Builtin: builtin.FS, Home: cfg.Home, Workspace: cfg.Workspace})
	if err != nil {
		return nil, nil, fmt.Errorf("skills: %w", err)
	}
	for _, name := range cfg.Skills.Index {
		if _, ok := reg.Catalog().Get(name); !ok {
			log.Warn("skills.index names a skill no layer has", "skill", name)
		}
	}
	if client != nil {
		st := skills.NewRedisState(client, cfg.Redis.Prefix)
		reg.SetIndexOrder(indexOrder(cfg, st, log))
		return reg, st, nil
	}
	reg.SetIndexOrder(indexOrder(cfg, nil, log))
	st, warns := skills.OpenFileState(cfg.Home)
	for _, w := range warns {
		log.Warn("skills state: " + w.String())
	}
	return reg, st, nil
}

// indexOrderWait bounds reading the load counts at a (re)load.
const indexOrderWait = 2 * time.Second

// indexOrder is what decides the index beyond the layers: skills.index,
// and the load counts when the state keeps them (u may be nil).
func indexOrder(cfg config.Config, u skills.Usage, log *slog.Logger) func() skills.IndexOrder {
	return func() skills.IndexOrder {
		o := skills.IndexOrder{Pinned: cfg.Skills.Index}
		if u == nil {
			return o
		}
		ctx, cancel := context.WithTimeout(context.Background(), indexOrderWait)
		defer cancel()
		uses, err := u.Uses(ctx)
		if err != nil {
			log.Warn("skills: load counts unavailable; the index orders the rest by name", "err", err)
		}
		o.Uses = uses
		return o
	}
}

// newApp builds the store, skills, policy, agent and gateway for cfg and
// registers their teardown. The caller closes it; when newApp fails it has
// undone what it set up.
func (e *environment) newApp(cfg config.Config, log *slog.Logger) (_ *app, err error) {
	if err := cfg.RequireModelKey(); err != nil {
		return nil, err
	}
	m := metrics.New()
	a := &app{cfg: cfg, log: log, metrics: m, lifecycle: lifecycle{log: log}}
	defer func() {
		if err != nil {
			a.close(context.WithoutCancel(e.ctx))
		}
	}()
	// go-redis has one process-wide logger; the last app built owns it,
	// which in the binary is the only one.
	a.redis = sessions.NewHealth(m.RedisUp, log)
	redis.SetLogger(a.redis)
	a.store, a.shared, err = e.openStore(cfg, log)
	if err != nil {
		return nil, err
	}
	a.onStop("store", func(context.Context) error { return a.store.Close() })
	m.RedisUp.Set(1)
	var sharedClient redis.UniversalClient
	if a.shared {
		sharedClient = a.store.Client()
	}
	a.skills, a.state, err = openSkills(cfg, sharedClient, log)
	if err != nil {
		return nil, err
	}
	logSkillWarnings(log, a.skills.Catalog(), e.verbose)

	// Traces go out over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set;
	// otherwise the tracer is off and costs nothing.
	provider, stopTracing, err := tracing.Setup(e.ctx, e.getenv, version)
	if err != nil {
		return nil, err
	}
	a.onStop("tracing", stopTracing)
	tracer := tracing.New(provider)

	// Every platform's alerting series exist at zero from the start.
	m.Prime(config.PlatformNames()...)
	// The MCP servers start here, before any turn can run; their teardown
	// comes after the gateway's (stop runs in reverse), so running turns
	// keep their tools while they drain.
	skillTools := agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home, Budget: cfg.Skills.BodyBudget, Writer: skills.NewWriter(cfg.Home)}, m, log)
	a.toolset, err = e.openTools(cfg, toolOptions{skill: skillTools.Tools(), metrics: m, channels: config.PlatformNames(), log: log, wait: mcpStartWait})
	if err != nil {
		return nil, err
	}
	a.onStop("mcp servers", func(context.Context) error { return a.toolset.close() })
	a.tools = a.toolset.registry
	// One pool for the model, as many connections as turns run at once;
	// each attempt is bounded by the model timeout, not the client.
	client := agent.NewClient(cfg.Model.BaseURL, cfg.Model.APIKey.Reveal(), outbound.Client(outbound.Options{Conns: cfg.Gateway.Workers}))
	// Each further model has a pool of its own, so that a slow fallback
	// cannot starve the default model of connections, and a retry budget
	// of its own.
	var models []agent.ModelConfig
	chains := map[string][]string{}
	for _, ep := range cfg.Endpoints() {
		chains[ep.Key] = ep.Fallbacks
		if ep.Key == config.DefaultModelKey {
			continue
		}
		models = append(models, agent.ModelConfig{
			Key: ep.Key, Name: ep.Name, Vision: ep.Vision, Timeout: ep.Timeout, MaxRetries: ep.MaxRetries, Fallbacks: ep.Fallbacks,
			Client: agent.NewClient(ep.BaseURL, ep.APIKey.Reveal(), outbound.Client(outbound.Options{Conns: cfg.Gateway.Workers})),
		})
	}
	m.PrimeModels(chains)
	primary, _ := cfg.Endpoint(config.DefaultModelKey)
	a.agent = agent.New(agent.Config{
		Model:             cfg.Model.Name,
		Vision:            cfg.Model.Vision,
		Fallbacks:         primary.Fallbacks,
		Models:            models,
		MaxToolIterations: cfg.Model.MaxToolIterations,
		Timeout:           cfg.Model.Timeout,
		TurnTimeout:       cfg.Model.TurnTimeout,
		MaxRetries:        cfg.Model.MaxRetries, // 0 means no retries in both
		MaxTokens:         cfg.Model.MaxTokens,
		SystemPrompt:      cfg.Model.SystemPrompt,
		Tracer:            tracer,

		MaxToolCallsPerAnswer: cfg.Model.MaxToolCallsPerAnswer,
		MaxToolCallsPerTurn:   cfg.Model.MaxToolCallsPerTurn,
	}, client, a.tools, m, log)
	a.policy = policy.New(cfg.Policies).WithModels(cfg.ModelDescriptions())

	var stopBg context.CancelFunc
	a.bg, stopBg = context.WithCancel(context.Background())
	a.onStop("background work", func(context.Context) error {
		stopBg()
		a.watchers.Wait()
		return nil
	})
	a.gateway = gateway.New(gateway.Config{
		Workers:         cfg.Gateway.Workers,
		QueueLimit:      cfg.Sessions.QueueLimit,
		MaxMessageChars: cfg.Sessions.MaxMessageChars,
		CompactTokens:   cfg.Sessions.CompactTokens,
		KeepRounds:      cfg.Sessions.KeepRounds,
		SkillBudget:     cfg.Skills.BodyBudget,
		Policy:          a.policy,
		Tools:           a.tools,
		Skills:          &gateway.Skills{Registry: a.skills, State: a.state, Reload: a.reloadSkills},
		// The store's Redis, embedded or shared: the limits hold over
		// every replica that shares it.
		Quotas: quota.New(a.store.Client(), cfg.Redis.Prefix),
		Usage:  tokenusage.New(a.store.Client(), cfg.Redis.Prefix),
		// Replies that could not be posted wait in the same Redis for
		// whichever replica is alive.
		Outbox: outbox.New(a.store.Client(), cfg.Redis.Prefix, outbox.Config{MaxAge: cfg.Outbox.MaxAge}, m, log),
		// Approvals live under each conversation's keys, beside its lock.
		Approvals:   approval.New(a.store.Client(), a.store.Key),
		Tracer:      tracer,
		Media:       media.New(cfg.Media),
		TypingDelay: cfg.Gateway.TypingDelay,
	}, a.store, a.agent, m, log)
	// Shutdown drains running turns until its context ends, then cancels
	// the rest; queued messages stay for the next replica.
	a.onStop("gateway", a.gateway.Shutdown)
	a.observeSkills(e.ctx)
	a.watchReloads()
	a.watchSkillState()
	return a, nil
}

// reloadSkills reloads here, then announces it so every replica reloads.
func (a *app) reloadSkills(ctx context.Context) (*skills.Catalog, error) {
	c, err := a.skills.Reload()
	if err != nil {
		a.metrics.SkillReloads.WithLabelValues(metrics.OutcomeError).Inc()
		return nil, err
	}
	a.metrics.SkillReloads.WithLabelValues(metrics.OutcomeOK).Inc()
	a.observeSkills(ctx)
	if a.shared {
		if err := skills.AnnounceReload(ctx, a.store.Client(), a.cfg.Redis.Prefix); err != nil {
			a.log.Warn("skills reloaded here, but the other replicas were not told", "err", err)
		}
	}
	return c, nil
}

// watchReloads follows reloads announced by other replicas until close.
func (a *app) watchReloads() {
	if !a.shared {
		return
	}
	ctx := a.bg
	ready := make(chan struct{})
	a.watchers.Go(func() {
		err := skills.WatchReloads(ctx, a.store.Client(), a.cfg.Redis.Prefix, a.skills, a.log, ready, func(_ *skills.Catalog, err error) {
			outcome := metrics.OutcomeOK
			if err != nil {
				outcome = metrics.OutcomeError
			}
			a.metrics.SkillReloads.WithLabelValues(outcome).Inc()
			a.observeSkills(ctx)
		})
		if err != nil {
			a.log.Warn("skills: not following reloads from other replicas", "err", err)
		}
	})
	<-ready
}

// skillStateRefresh is how often a replica re-reads the skill state in
// case it missed the announcement of a change.
const skillStateRefresh = 10 * time.Second

// watchSkillState serves the skill state of turns from memory, following
// the changes other replicas and the CLI announce, until close.
func (a *app) watchSkillState() {
	rs, ok := a.state.(*skills.RedisState)
	if !ok {
		return
	}
	ready := make(chan struct{})
	a.watchers.Go(func() {
		if err := rs.Watch(a.bg, skillStateRefresh, a.log, ready); err != nil {
			a.log.Warn("skills: reading the skill state from Redis on every turn", "err", err)
		}
	})
	<-ready
}

// watchRedis keeps parley_redis_up current without waiting for a
// readiness probe, so the Redis-down alert fires on its own.
func (a *app) watchRedis(every time.Duration) {
	a.watchers.Go(func() { a.redis.Watch(a.bg, a.store.Ping, every) })
}

// skillCounts is what the skill gauges and the start-up line report.
type skillCounts struct {
	known      map[[2]string]int // (source, state) → skills
	total      int
	enabled    int
	indexed    int // skills listed in the bot-wide index
	leftOut    int // enabled, model-invocable skills the index has no room for
	indexBytes int
}

// countSkills reads the current catalog and state. The index counted is
// the bot-wide one: every enabled skill, before channel policies and the
// tools of a conversation narrow it (those only make it smaller).
func (a *app) countSkills(ctx context.Context) skillCounts {
	c := a.skills.Catalog()
	disabled, err := a.state.Disabled(ctx)
	if err != nil {
		a.log.Debug("skills: cannot read the disabled list for the metrics", "err", err)
	}
	n := skillCounts{known: map[[2]string]int{}, total: c.Len()}
	for _, s := range c.All() {
		state := "enabled"
		if disabled[s.Name] {
			state = "disabled"
		} else {
			n.enabled++
		}
		n.known[[2]string{string(s.Source), state}]++
	}
	set := &agent.SkillSet{Catalog: c, Disabled: disabled}
	index, _ := set.Index()
	n.indexBytes = len(index)
	listed, leftOut := c.IndexListing(set.Visible)
	n.indexed, n.leftOut = len(listed), len(leftOut)
	return n
}

// skillSources and skillStates bound the labels of parley_skills; every
// pair is set, to 0 when no skill has it, so a series never lingers.
var (
	skillSources = []skills.Source{skills.SourceBuiltin, skills.SourceUser, skills.SourceWorkspace}
	skillStates  = []string{"enabled", "disabled"}
)

// observeSkills sets the skill gauges from the current catalog and state.
// It runs at start, after each reload and before each scrape, so the
// gauges are right before the first turn and after `skills off` from
// anywhere. Each series is set, never reset, so a scrape running at the
// same time never sees a half-counted state.
func (a *app) observeSkills(ctx context.Context) {
	n := a.countSkills(ctx)
	for _, src := range skillSources {
		for _, state := range skillStates {
			a.metrics.SkillsKnown.WithLabelValues(string(src), state).Set(float64(n.known[[2]string{string(src), state}]))
		}
	}
	a.metrics.SkillIndexBytes.Set(float64(n.indexBytes))
}

// metricsHandler serves the registry, with the skill gauges brought up to
// date before each scrape.
func (a *app) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{Registry: a.metrics.Registry, EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.observeSkills(r.Context())
		h.ServeHTTP(w, r)
	})
}

// logSkillsLoaded is the start-up report of the skills: one line of
// counts, however large the library (`parley skills list` shows each).
func (a *app) logSkillsLoaded(ctx context.Context) {
	n := a.countSkills(ctx)
	c := a.skills.Catalog()
	a.log.Info("skills loaded", "skills", n.total, "enabled", n.enabled, "indexed", n.indexed,
		"left_out_of_index", n.leftOut, "index_bytes", n.indexBytes,
		"warnings", len(c.Warnings()), "skipped", len(c.Skipped()), "details", "parley skills list")
}

// close runs the teardown of everything set up, in reverse: the channel
// connections, the gateway (draining turns until ctx ends), the background
// work and the store.
func (a *app) close(ctx context.Context) error { return a.stop(ctx) }

// parseAndLoad parses a command's flags (fs must have --config from
// configFlag) and loads the configuration they name.
func (e *environment) parseAndLoad(fs *flag.FlagSet, path *string, args []string) (config.Config, error) {
	if err := fs.Parse(args); err != nil {
		return config.Config{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	return config.Load(*path, e.getenv)
}

// configFlag registers --config on fs.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "config file (default $PARLEY_CONFIG)")
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("parley "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
