package main

import (
	"context"
	"errors"
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
			return a.policy.Resolve(policy.Scope{Channel: m.Channel, Account: m.Account, Workspace: m.Workspace, Chat: m.Chat}).DMMatters()
		},
	}
	var opened []*channels.Capabilities
	for _, p := range config.Platforms() {
		chs, err := openPlatform(ctx, a.cfg.Platforms[p.Name], deps)
		if err != nil {
			return nil, err
		}
		for _, ch := range chs {
			opened = append(opened, channels.CapabilitiesOf(ch))
		}
	}
	return opened, nil
}

// openPlatform opens a platform's adapters from its section: one per
// account when the section has accounts (channels.AccountsOpener), else
// the one it turns on, or none.
func openPlatform(ctx context.Context, section config.PlatformConfig, deps channels.Deps) ([]channels.Channel, error) {
	if multi, ok := section.(channels.AccountsOpener); ok {
		return multi.OpenAccounts(ctx, deps)
	}
	opener, ok := section.(channels.Opener)
	if !ok {
		return nil, nil // no section (the console)
	}
	ch, err := opener.Open(ctx, deps)
	if err != nil || ch == nil {
		return nil, err
	}
	return []channels.Channel{ch}, nil
}

// adapterName names an adapter in logs and /readyz: its platform, and
// its account when it is not the default (slack/hr).
func adapterName(ch channels.Channel) string {
	if a, ok := ch.(channels.Accounted); ok {
		return channels.AdapterKey(ch.Name(), a.Account())
	}
	return ch.Name()
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
					a.log.Error("channel cannot run", "channel", adapterName(ch), "err", err)
				}
			})
		}
		a.log.Info("channel enabled", "channel", adapterName(ch))
	}
	if len(chs) == 0 {
		// Without a channel the server answers probes and nothing else; an
		// operator who forgot the credentials' variables should see why.
		a.log.Warn("no channel is configured: no chat platform can reach this server; set a platform's credentials (docs/configuration.md) or talk to the bot with parley chat")
	}
	return nil
}

// channelsReady reports the adapters whose connection is down, each by
// its platform and account (slack/hr: …). A platform with every adapter
// down makes the replica unready (down); one account down beside others
// that serve leaves it ready, and is named as degraded, so that a load
// balancer keeps sending the other apps' webhooks here.
func (a *app) channelsReady() (down error, degraded []string) {
	type platform struct {
		serving bool
		errs    []error
	}
	var order []string
	byName := map[string]*platform{}
	for _, c := range a.channels {
		h := c.Health
		if h == nil {
			continue
		}
		name := c.Channel.Name()
		p := byName[name]
		if p == nil {
			p = &platform{}
			byName[name] = p
			order = append(order, name)
		}
		if err := h.Ready(); err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %w", adapterName(c.Channel), err))
		} else {
			p.serving = true
		}
	}
	var errs []error
	for _, name := range order {
		p := byName[name]
		if !p.serving {
			errs = append(errs, p.errs...)
			continue
		}
		for _, err := range p.errs {
			degraded = append(degraded, err.Error())
		}
	}
	return errors.Join(errs...), degraded
}
