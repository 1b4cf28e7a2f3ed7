package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/triggers/schedule"
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
	list, err := schedule.Statuses(e.ctx, conf, schedule.NewChats(client, cfg.Redis.Prefix, conf, nil),
		schedule.NewClaims(client, cfg.Redis.Prefix), time.Now())
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Schedules []schedule.Status `json:"schedules"`
		}{list})
	}
	return writeSchedules(e, list)
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
