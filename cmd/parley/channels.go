package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/channels"
)

// buildChannels creates every platform adapter the configuration enables.
// Each builder returns no channel when its platform is not configured.
func (a *app) buildChannels() ([]channels.Channel, error) {
	builders := []func() ([]channels.Channel, error){a.slackChannels, a.feishuChannels, a.wechatChannels}
	var all []channels.Channel
	for _, build := range builders {
		chs, err := build()
		if err != nil {
			return nil, err
		}
		all = append(all, chs...)
	}
	return all, nil
}

// startChannels registers the adapters with the gateway, mounts their
// webhook routes and starts their connections. The connections run until
// stopChannels; whoever starts them (serve) stops them.
func (a *app) startChannels(mux *http.ServeMux) error {
	chs, err := a.buildChannels()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopRunners = cancel
	for _, ch := range chs {
		a.gateway.Register(ch)
		a.metrics.Prime(ch.Name())
		a.channels = append(a.channels, ch)
		if h, ok := ch.(channels.HTTPChannel); ok {
			h.Mount(mux)
		}
		if r, ok := ch.(channels.Runner); ok {
			a.runners.Go(func() {
				if err := r.Run(ctx, a.gateway); err != nil && !errors.Is(err, context.Canceled) {
					a.log.Error("channel connection stopped", "channel", ch.Name(), "err", err)
				}
			})
		}
		a.log.Info("channel enabled", "channel", ch.Name())
	}
	return nil
}

// stopChannels ends every connection an adapter holds and waits for it.
func (a *app) stopChannels() {
	if a.stopRunners != nil {
		a.stopRunners()
	}
	a.runners.Wait()
}

// channelsReady reports the first adapter whose connection is down.
func (a *app) channelsReady() error {
	for _, ch := range a.channels {
		if h, ok := ch.(channels.Health); ok {
			if err := h.Ready(); err != nil {
				return fmt.Errorf("%s: %w", ch.Name(), err)
			}
		}
	}
	return nil
}
