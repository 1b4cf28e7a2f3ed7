package main

import (
	"net/http"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/webhook"
)

// withTriggers gives the gateway what trigger work needs: the alert
// groups' threads in the store's Redis and the outbox's max age for a
// thread's root post. (What an adapter needs of a message the bot starts
// itself, it says as a channels.Addresser.)
func (a *app) withTriggers(gc *gateway.Config, cfg config.Config) {
	gc.Threads = triggers.NewThreads(a.store.Client(), cfg.Redis.Prefix)
	gc.WorkMaxAge = cfg.Outbox.MaxAge
}

// mountWebhooks serves triggers.webhooks at POST /hooks/NAME on mux; the
// gateway takes their work.
func (a *app) mountWebhooks(mux *http.ServeMux) {
	hooks := webhook.FromConfig(a.cfg).Webhooks
	if len(hooks) == 0 {
		return
	}
	webhook.New(webhook.Options{
		Webhooks: hooks, Submitter: a.gateway, Redis: a.store.Client(), Prefix: a.cfg.Redis.Prefix,
		Metrics: a.metrics, Log: a.log,
	}).Mount(mux)
}
