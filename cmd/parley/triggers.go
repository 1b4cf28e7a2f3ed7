package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
	"github.com/redis/go-redis/v9"
)

// triggersCLI is `parley triggers list`: every schedule (the file's and
// the chats') with its next fire and its latest result, read from the
// Redis the replicas share.
func (e *environment) triggersCLI(args []string) error {
	if len(args) == 0 || args[0] != "list" {
		return fmt.Errorf("%w: parley triggers takes list", errUsage)
	}
	fs := newFlagSet("triggers list", e.stderr)
	path := configFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: parley triggers list takes no arguments, got %q", errUsage, fs.Arg(0))
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Redis.URL == "" {
		return errors.New("the schedules' state is kept in Redis, and REDIS_URL is not set: without it each `parley serve` keeps it in its own memory; set REDIS_URL to the Redis the bot uses")
	}
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
	if err != nil {
		return err
	}
	defer client.Close()
	lister := newTriggerLister(client, cfg)
	list, err := lister.Schedules(e.ctx)
	if err != nil {
		return err
	}
	hooks, err := lister.Webhooks(e.ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Webhooks  []webhook.Status  `json:"webhooks"`
			Schedules []schedule.Status `json:"schedules"`
		}{hooks, list})
	}
	if err := writeWebhooks(e, hooks); err != nil {
		return err
	}
	return writeSchedules(e, list)
}

func writeWebhooks(e *environment, hooks []webhook.Status) error {
	if len(hooks) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WEBHOOK\tKIND\tPATH\tLAST REQUEST")
	for _, h := range hooks {
		last := "-"
		if h.Last != nil {
			last = h.Last.Outcome + " " + h.Last.At.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h.Name, h.Kind, h.Path, last)
	}
	fmt.Fprintln(w)
	return w.Flush()
}

func writeSchedules(e *environment, list []schedule.Status) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No schedules: add them under triggers.schedules, or with /schedule add in a chat.")
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCHEDULE\tSOURCE\tCRON\tTO\tANSWER\tNEXT\tLAST")
	for _, s := range list {
		last := "-"
		if s.Last != nil {
			last = s.Last.Outcome + " " + s.Last.At.UTC().Format(time.RFC3339)
			if s.Last.Error != "" {
				last += " (" + s.Last.Error + ")"
			}
		}
		to := s.To.Platform + ":" + s.To.Workspace + ":" + s.To.Chat
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Source, s.Cron, to, s.Answer, s.Next.UTC().Format(time.RFC3339), last)
	}
	return w.Flush()
}

// triggerLister lists the triggers of cfg as an operator sees them, the
// same for `parley triggers list` and the admin console's Triggers page:
// the schedules (the file's and the chats') and the webhooks, with what
// the replicas recorded in Redis.
type triggerLister struct {
	schedule.Lister
	hooks webhook.Lister
}

// Webhooks lists the webhooks with their last request.
func (l triggerLister) Webhooks(ctx context.Context) ([]webhook.Status, error) {
	return l.hooks.Statuses(ctx)
}

// newTriggerLister lists cfg's triggers kept in client.
func newTriggerLister(client redis.UniversalClient, cfg config.Config) triggerLister {
	conf, prefix := schedule.FromConfig(cfg), cfg.Redis.Prefix
	return triggerLister{
		Lister: schedule.Lister{Config: conf, Chats: schedule.NewChats(client, prefix, conf, nil), Claims: schedule.NewClaims(client, prefix)},
		hooks:  webhook.Lister{Webhooks: webhook.FromConfig(cfg).Webhooks, Redis: client, Prefix: prefix},
	}
}
