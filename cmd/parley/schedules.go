package main

import (
	"context"

	"github.com/parleyhq/parley/triggers/schedule"
)

// startSchedules runs this replica's scheduler: the file's schedules and
// the chats' own, each fire time once across the replicas sharing Redis,
// handed to the gateway. It stops before the gateway drains, so that no
// fire is handed to a gateway that refuses it.
func (a *app) startSchedules(ctx context.Context) error {
	conf := schedule.FromConfig(a.cfg)
	file, err := conf.FileEntries()
	if err != nil {
		return err
	}
	labels := []string{schedule.ChatLabel}
	for _, e := range file {
		labels = append(labels, e.Label)
	}
	a.metrics.PrimeSchedules(labels...)
	client, prefix := a.store.Client(), a.cfg.Redis.Prefix
	s := schedule.New(schedule.Options{
		Claims:    schedule.NewClaims(client, prefix),
		Source:    schedule.Sources{schedule.Static(file), schedule.NewChats(client, prefix, conf, nil)},
		Submitter: a.gateway, Log: a.log, Metrics: a.metrics,
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(runCtx) // returns nil once runCtx ends
	}()
	a.onStop("schedules", func(context.Context) error {
		cancel()
		<-done
		return nil
	})
	return nil
}
