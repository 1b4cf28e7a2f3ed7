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
	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/media"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/gateway/quota"
	tokenusage "github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/live"
	"github.com/parleyhq/parley/tracing"
	"github.com/parleyhq/parley/triggers/schedule"
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
	skills  *live.Library
	gateway *gateway.Gateway
	redis   *sessions.Health
	// replica names this process in the audit ledger and the console.
	replica string
	ledger  *audit.Ledger

	// Background work (Redis health) runs under bg until the teardown
	// cancels it and waits.
	bg       context.Context
	watchers sync.WaitGroup

	channels []*channels.Capabilities

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
	opts := sessions.FromConfig(cfg).Options(cfg.Redis.Prefix)
	if cfg.Redis.URL == "" {
		level := slog.LevelWarn
		if e.oneShotChat {
			level = slog.LevelDebug
		}
		log.Log(e.ctx, level, "REDIS_URL is not set: using the in-memory store, which keeps conversations in this process only — run one replica, and expect a restart to forget everything")
		s, err := sessions.NewMemory(opts)
		return s, false, err
	}
	// A connection for each worker's command and one for what its turn
	// starts beside it (the lock's renewal, the outbox), and one for each
	// webhook being handled.
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 2*gateway.SectionFrom(cfg).Workers+cfg.Server.MaxConcurrentBodies)
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

// newApp builds the store, skills, policy, agent and gateway for cfg and
// registers their teardown. The caller closes it; when newApp fails it has
// undone what it set up.
func (e *environment) newApp(cfg config.Config, log *slog.Logger) (_ *app, err error) {
	if err := agent.ModelsFrom(cfg).RequireKey(); err != nil {
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
	skillOpts := skillOptions(cfg, sharedClient, log)
	skillOpts.Metrics = m
	a.skills, err = live.Open(skillOpts)
	if err != nil {
		return nil, err
	}
	logSkillWarnings(log, a.skills.Registry.Catalog(), e.verbose)

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
	// The tool sources (the MCP servers) start here, before any turn can
	// run; their teardown comes after the gateway's (stop runs in
	// reverse), so running turns keep their tools while they drain.
	skillTools := agent.NewSkillTools(agent.SkillToolsConfig{Home: cfg.Home, Budget: cfg.Skills.BodyBudget, Writer: skills.NewWriter(cfg.Home)}, m, log)
	relay := &toolRelay{}
	// send_file, the builtin tool of the class send, beside the skill tools.
	builtins := append(skillTools.Tools(), agentfiles.SendFile{})
	a.toolset, err = e.openTools(cfg, toolOptions{skill: builtins, metrics: m, log: log, wait: startWait, redis: sharedClient, hooks: relay.hooks()})
	if err != nil {
		return nil, err
	}
	a.onStop("tool sources", func(context.Context) error { return a.toolset.close() })
	a.tools = a.toolset.registry
	a.agent = agent.FromConfig(cfg, gateway.SectionFrom(cfg).Workers, tracer, a.tools, m, log)
	a.policy = policy.NewFromConfig(cfg).WithModels(agent.ModelsFrom(cfg).Descriptions())
	if e.operator != "" {
		a.policy = a.policy.WithOperator(console.Name, e.operator)
	}

	var stopBg context.CancelFunc
	a.bg, stopBg = context.WithCancel(context.Background())
	a.onStop("background work", func(context.Context) error {
		stopBg()
		a.watchers.Wait()
		return nil
	})
	// The skill watchers stop after the gateway's drain (stop runs in
	// reverse), so turns still running see reloads from other replicas.
	a.skills.Start(e.ctx)
	a.onStop("skill watchers", func(context.Context) error { a.skills.Stop(); return nil })
	a.replica = replicaID()
	a.ledger = audit.New(a.store.Client(), audit.Options{Prefix: cfg.Redis.Prefix, Retention: audit.FromConfig(cfg).Retention, Replica: a.replica, Log: log})
	a.gateway = a.newGateway(cfg, tracer)
	relay.gw.Store(a.gateway)
	// Shutdown drains running turns until its context ends, then cancels
	// the rest; queued messages stay for the next replica.
	a.onStop("gateway", a.gateway.Shutdown)
	return a, nil
}

// newGateway builds the gateway of cfg's sections over the parts built so
// far: the store's Redis, embedded or shared, holds the limits, the usage,
// the outbox and the approvals of every replica that shares it.
func (a *app) newGateway(cfg config.Config, tracer tracing.Tracer) *gateway.Gateway {
	gc := gateway.ConfigFrom(cfg)
	gc.Policy, gc.Tools, gc.Tracer = a.policy, a.tools, tracer
	gc.Skills = &gateway.Skills{Registry: a.skills.Registry, State: a.skills.State, Reload: a.skills.Reload}
	gc.Quotas = quota.New(a.store.Client(), cfg.Redis.Prefix)
	gc.Usage = tokenusage.New(a.store.Client(), cfg.Redis.Prefix)
	// Replies that could not be posted wait in Redis for whichever
	// replica is alive.
	// The files a turn's tools make are kept beside its conversation, so
	// that any replica, and the outbox, can send them.
	gc.Files = agentfiles.NewKeeper(a.store, agentfiles.FromConfig(cfg))
	gc.Outbox = outbox.New(a.store.Client(), cfg.Redis.Prefix, outbox.Config{MaxAge: cfg.Outbox.MaxAge, Files: gc.Files}, a.metrics, a.log)
	// Approvals live under each conversation's keys, beside its lock.
	gc.Approvals = approval.New(a.store.Client(), a.store.Key)
	gc.Media = media.New(media.FromConfig(cfg))
	gc.Audit = a.ledger
	a.withTriggers(&gc, cfg)
	gc.Schedules = schedule.NewChats(a.store.Client(), cfg.Redis.Prefix, schedule.FromConfig(cfg), nil)
	return gateway.New(gc, a.store, a.agent, a.metrics, a.log)
}

// watchRedis keeps parley_redis_up current without waiting for a
// readiness probe, so the Redis-down alert fires on its own.
func (a *app) watchRedis(every time.Duration) {
	a.watchers.Go(func() { a.redis.Watch(a.bg, a.store.Ping, every) })
}

// metricsHandler serves the registry, with the skill gauges brought up to
// date before each scrape.
func (a *app) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{Registry: a.metrics.Registry, EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.skills.Observe(r.Context())
		h.ServeHTTP(w, r)
	})
}

// close runs the teardown of everything set up, in reverse: the channel
// connections, the gateway (draining turns until ctx ends), the background
// work and the store.
func (a *app) close(ctx context.Context) error { return a.stop(ctx) }

// parseAndLoad parses a command's flags (fs must have --config from
// configFlag) and loads the configuration they name.
func (e *environment) parseAndLoad(fs *flag.FlagSet, path *string, args []string) (config.Config, error) {
	if err := fs.Parse(args); err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", errUsage, err)
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
