package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// app is everything one process wires together.
type app struct {
	cfg     config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	store   *sessions.RedisStore
	agent   *agent.Agent
	gateway *gateway.Gateway
}

// loadConfig parses the common --config flag out of fs and loads the file.
func (e *environment) loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path, e.getenv)
	if err != nil {
		return cfg, err
	}
	return cfg, nil
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newApp builds the store, agent and gateway for cfg. The caller closes it.
func (e *environment) newApp(cfg config.Config, log *slog.Logger) (*app, error) {
	if err := cfg.RequireModelKey(); err != nil {
		return nil, err
	}
	m := metrics.New()
	opts := sessions.Options{
		Prefix:      cfg.Redis.Prefix,
		HistoryTTL:  cfg.Sessions.HistoryTTL,
		MaxMessages: cfg.Sessions.MaxMessages,
		LockTTL:     cfg.Sessions.LockTTL,
	}
	var store *sessions.RedisStore
	if cfg.Redis.URL == "" {
		log.Warn("REDIS_URL is not set: using the in-memory store, which keeps conversations in this process only — run one replica, and expect a restart to forget everything")
		s, err := sessions.NewMemory(opts)
		if err != nil {
			return nil, err
		}
		store = s
	} else {
		client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL)
		if err != nil {
			return nil, err
		}
		store = sessions.NewRedis(client, opts)
	}
	m.RedisUp.Set(1)

	retries := cfg.Model.MaxRetries
	if retries == 0 {
		retries = -1 // the file's 0 means "never retry"; the agent's 0 means its default
	}
	tools := agent.NewRegistry()
	client := agent.NewClient(cfg.Model.BaseURL, cfg.Model.APIKey, &http.Client{})
	a := agent.New(agent.Config{
		Model:             cfg.Model.Name,
		MaxToolIterations: cfg.Model.MaxToolIterations,
		Timeout:           cfg.Model.Timeout,
		MaxRetries:        retries,
		MaxTokens:         cfg.Model.MaxTokens,
		SystemPrompt:      cfg.Model.SystemPrompt,
	}, client, tools, m, log)
	g := gateway.New(gateway.Config{
		Workers:         cfg.Gateway.Workers,
		QueueLimit:      cfg.Sessions.QueueLimit,
		MaxMessageChars: cfg.Sessions.MaxMessageChars,
	}, store, a, m, log)
	return &app{cfg: cfg, log: log, metrics: m, store: store, agent: a, gateway: g}, nil
}

// close stops the gateway (draining turns until ctx ends) and the store.
func (a *app) close(ctx context.Context) error {
	err := a.gateway.Shutdown(ctx)
	if cerr := a.store.Close(); err == nil {
		err = cerr
	}
	return err
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

func (e *environment) config(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: parley config check [--config FILE]", errUsage)
	}
	fs := newFlagSet("config check", e.stderr)
	path := configFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg, err := e.loadConfig(*path)
	if err != nil {
		return err
	}
	out, err := cfg.Masked().YAML()
	if err != nil {
		return fmt.Errorf("render config: %w", err)
	}
	e.stdout.Write(out)
	if err := cfg.RequireModelKey(); err != nil {
		fmt.Fprintf(e.stderr, "warning: %v\n", err)
	}
	return nil
}
