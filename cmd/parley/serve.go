package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/listener"
)

func (e *environment) serve(args []string) (err error) {
	fs := newFlagSet("serve", e.stderr)
	path := configFlag(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	cfg, warnings, err := config.LoadWithWarnings(*path, e.getenv)
	if err != nil {
		return err
	}
	if err := policyNames(cfg, *path, e.getenv); err != nil {
		return err // what config check refuses, with its words
	}
	log := newLogger(e.stderr, cfg)
	for _, w := range warnings {
		log.Warn("config: " + w)
	}
	a, err := e.newApp(cfg, log)
	if err != nil {
		return err
	}
	// Every step below registers its teardown as it succeeds; whichever
	// way serve ends, they run in reverse: readiness off, the HTTP server,
	// the channel connections, the gateway (draining running turns until
	// the deadline), the background work, the store.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), gateway.SectionFrom(cfg).ShutdownTimeout)
		defer cancel()
		if stopErr := a.close(ctx); stopErr != nil && err == nil {
			err = fmt.Errorf("shutdown: %w", stopErr)
		}
		if err == nil {
			log.Info("stopped")
		}
	}()
	a.gateway.Start()
	if err := a.startSchedules(e.ctx); err != nil {
		return err
	}
	a.watchRedis(5 * time.Second)
	a.skills.LogLoaded(e.ctx)

	var draining atomic.Bool
	mux := a.routes(&draining)
	if err := a.startChannels(e.ctx, mux); err != nil {
		return err
	}
	if err := a.startAdmin(); err != nil {
		return err
	}
	serveErr := make(chan error, 2)
	addr, err := a.serveWebhooks(mux, serveErr)
	if err != nil {
		return err
	}
	if err := a.serveMetrics(serveErr); err != nil {
		return err
	}
	// Stop intake first: readiness fails, so no new requests are routed
	// here while running turns finish.
	a.onStop("readiness", func(context.Context) error {
		log.Info("shutting down: draining running turns", "deadline", gateway.SectionFrom(cfg).ShutdownTimeout)
		draining.Store(true)
		return nil
	})
	log.Info("parley serving", "addr", addr, "version", version, "model", agent.ModelSectionFrom(cfg).Name)

	select {
	case <-e.ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}
	return nil
}

// serveWebhooks serves mux on the listen address, behind the listener's
// deadlines, body limit and webhook timing; a server that stops on its own
// reports to serveErr. It returns the address it listens on.
func (a *app) serveWebhooks(mux *http.ServeMux, serveErr chan<- error) (string, error) {
	c := a.cfg
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	busy := logthrottle.New(logthrottle.DefaultEvery, nil) // a flood of slow bodies logs a line per interval
	srv := listener.New(c.Server, listener.LimitBodies(c.Server.MaxConcurrentBodies, listener.TimeWebhooks(mux, a.metrics), func() {
		a.metrics.MessagesRejected.WithLabelValues("http", "busy").Inc()
		busy.Log(context.Background(), a.log, slog.LevelWarn, "busy", "http", "request refused: server.max_concurrent_bodies requests are reading a body already", "limit", c.Server.MaxConcurrentBodies)
	}))
	go func() { serveErr <- srv.Serve(ln) }()
	a.onStop("http server", srv.Shutdown)
	return ln.Addr().String(), nil
}

// serveMetrics serves /metrics on server.metrics_listen, when set, instead
// of on the webhook listener.
func (a *app) serveMetrics(serveErr chan<- error) error {
	c := a.cfg.Server
	if c.MetricsListen == "" {
		return nil
	}
	mln, err := net.Listen("tcp", c.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen on %s (PARLEY_METRICS_LISTEN): %w", c.MetricsListen, err)
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("GET /metrics", a.metricsHandler())
	msrv := listener.New(c, metricsMux)
	go func() { serveErr <- msrv.Serve(mln) }()
	a.onStop("metrics server", msrv.Shutdown)
	a.log.Info("metrics served on their own listener", "addr", mln.Addr().String())
	return nil
}

// routes is the HTTP surface: health, readiness, metrics and (from the
// channel issues on) every configured channel's webhook.
func (a *app) routes(draining *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		err := a.store.Ping(ctx)
		a.redis.Observe(err) // logs a change of state, not every probe
		if err != nil {
			http.Error(w, "redis unreachable", http.StatusServiceUnavailable)
			return
		}
		down, degraded := a.channelsReady()
		if err := down; err != nil {
			a.log.Warn("readiness: channel degraded", "err", err)
			http.Error(w, "degraded: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		// A down part of a tool source (an MCP server) takes only its own
		// tools away (they are not offered meanwhile), so the replica stays
		// ready and says which is down; why is in the log and in parley
		// tools list.
		w.Write([]byte("ready\n"))
		for _, account := range degraded {
			fmt.Fprintf(w, "degraded: %s\n", account)
		}
		for _, part := range a.toolset.downParts() {
			fmt.Fprintf(w, "degraded: %s is down\n", part)
		}
	})
	// OpenMetrics when the scraper asks for it: the exemplars (trace ids on
	// the latency histograms) are only shown in that format. With
	// PARLEY_METRICS_LISTEN they are served there instead, off the public
	// webhook port.
	if a.cfg.Server.MetricsListen == "" {
		mux.Handle("GET /metrics", a.metricsHandler())
	}
	a.mountWebhooks(mux)
	return mux
}
