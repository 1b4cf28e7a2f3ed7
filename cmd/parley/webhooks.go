package main

import (
	"net/http"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
	"github.com/parleyhq/parley/channels/slack"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
)

// withTriggers gives the gateway what trigger work needs: the alert
// groups' threads in the store's Redis, the mark by which Slack follows a
// thread the bot posted in (people's replies there reach the bot without
// a mention) and Feishu's reply in a root's thread, and the outbox's max age for a thread's root post.
func (a *app) withTriggers(gc *gateway.Config, cfg config.Config) {
	gc.Threads = triggers.NewThreads(a.store.Client(), cfg.Redis.Prefix)
	gc.Address = map[string]func(*channels.Message){slack.Name: slack.Address, feishu.Name: feishu.Address}
	gc.WorkMaxAge = cfg.Outbox.MaxAge
}

// mountWebhooks serves triggers.webhooks at POST /hooks/NAME on mux; the
// gateway takes their work.
func (a *app) mountWebhooks(mux *http.ServeMux) {
	hooks := schedule.FromConfig(a.cfg).Webhooks
	if len(hooks) == 0 {
		return
	}
	webhook.New(webhook.Options{
		Webhooks: hooks, Submitter: a.gateway, Redis: a.store.Client(), Prefix: a.cfg.Redis.Prefix,
		Metrics: a.metrics, Log: a.log,
	}).Mount(mux)
}
