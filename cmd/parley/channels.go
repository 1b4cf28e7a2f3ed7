package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// openChannels opens the channel of every registered platform whose
// section turns it on. The platforms come from their registrations
// (config.RegisterPlatform); nothing here names one.
func (a *app) openChannels(ctx context.Context) ([]*channels.Capabilities, error) {
	deps := channels.Deps{
		Handler:    a.gateway,
		Redis:      a.store.Client(),
		Shared:     a.shared,
		Prefix:     a.cfg.Redis.Prefix,
		HistoryTTL: sessions.FromConfig(a.cfg).HistoryTTL,
		Conns:      gateway.SectionFrom(a.cfg).Workers,
		Home:       a.cfg.Home,
		Metrics:    a.metrics,
		Log:        a.log,
		DMMatters: func(m channels.Message) bool {
			return a.policy.Resolve(policy.Scope{Channel: m.Channel, Workspace: m.Workspace, Chat: m.Chat}).DMMatters()
		},
	}
	var opened []*channels.Capabilities
	for _, p := range config.Platforms() {
		opener, ok := a.cfg.Platforms[p.Name].(channels.Opener)
		if !ok {
			continue // no section (the console)
		}
		ch, err := opener.Open(ctx, deps)
		if err != nil {
			return nil, err
		}
		if ch != nil {
			opened = append(opened, channels.CapabilitiesOf(ch))
		}
	}
	return opened, nil
}

// startChannels registers the adapters with the gateway, mounts their
// webhook routes and starts their connections, and registers their stop:
// the connections run until the app's teardown cancels them and waits.
func (a *app) startChannels(ctx context.Context, mux *http.ServeMux) error {
	chs, err := a.openChannels(ctx)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var runners sync.WaitGroup
	a.onStop("channel connections", func(context.Context) error {
		cancel()
		runners.Wait()
		return nil
	})
	for _, c := range chs {
		ch := c.Channel
		a.gateway.Register(ch)
		a.channels = append(a.channels, c)
		if h := c.HTTP; h != nil {
			h.Mount(mux)
		}
		if r := c.Runner; r != nil {
			runners.Go(func() {
				if err := r.Run(runCtx, a.gateway); err != nil {
					a.log.Error("channel cannot run", "channel", ch.Name(), "err", err)
				}
			})
		}
		a.log.Info("channel enabled", "channel", ch.Name())
	}
	if len(chs) == 0 {
		// Without a channel the server answers probes and nothing else; an
		// operator who forgot the credentials' variables should see why.
		a.log.Warn("no channel is configured: no chat platform can reach this server; set a platform's credentials (docs/configuration.md) or talk to the bot with parley chat")
	}
	return nil
}

// channelsReady reports the first adapter whose connection is down.
func (a *app) channelsReady() error {
	for _, c := range a.channels {
		if h := c.Health; h != nil {
			if err := h.Ready(); err != nil {
				return fmt.Errorf("%s: %w", c.Channel.Name(), err)
			}
		}
	}
	return nil
}
