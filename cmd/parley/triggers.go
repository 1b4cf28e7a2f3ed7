package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	conf := schedule.FromConfig(cfg)
	list, err := newScheduleLister(client, cfg.Redis.Prefix, conf).Schedules(e.ctx)
	if err != nil {
		return err
	}
	hooks, err := webhookStatuses(e.ctx, client, cfg.Redis.Prefix, webhook.FromConfig(cfg).Webhooks)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Webhooks  []webhookStatus   `json:"webhooks"`
			Schedules []schedule.Status `json:"schedules"`
		}{hooks, list})
	}
	if err := writeWebhooks(e, hooks); err != nil {
		return err
	}
	return writeSchedules(e, list)
}

// webhookStatus is what an operator sees of one webhook: its route and
// its last request's outcome.
type webhookStatus struct {
	Name string               `json:"name"`
	Kind string               `json:"kind"`
	Path string               `json:"path"`
	Last *webhook.LastRequest `json:"last,omitempty"`
}

// webhookStatuses lists the webhooks of the file, by name, with the last
// request each recorded in Redis.
func webhookStatuses(ctx context.Context, client redis.UniversalClient, prefix string, hooks webhook.Webhooks) ([]webhookStatus, error) {
	names := make([]string, 0, len(hooks))
	for name, w := range hooks {
		if w != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]webhookStatus, 0, len(names))
	for _, name := range names {
		st := webhookStatus{Name: name, Kind: hooks[name].Kind, Path: "/hooks/" + name}
		last, ok, err := webhook.Last(ctx, client, prefix, name)
		if err != nil {
			return nil, err
		}
		if ok {
			st.Last = &last
		}
		out = append(out, st)
	}
	return out, nil
}

func writeWebhooks(e *environment, hooks []webhookStatus) error {
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

// newScheduleLister lists the schedules kept under prefix.
func newScheduleLister(client redis.UniversalClient, prefix string, conf *schedule.Config) schedule.Lister {
	return schedule.Lister{Config: conf, Chats: schedule.NewChats(client, prefix, conf, nil), Claims: schedule.NewClaims(client, prefix)}
}
