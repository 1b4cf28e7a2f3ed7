package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/config"
	tokenusage "github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/sessions"
)

// usageCLI is `parley usage`: the model tokens spent over a window, by
// user, chat, channel or model, read from the Redis the replicas share.
func (e *environment) usageCLI(args []string) error {
	fs := newFlagSet("usage", e.stderr)
	path := configFlag(fs)
	since := fs.Duration("since", 24*time.Hour, "the window, back from now (rounded out to whole hours; at most 840h)")
	by := fs.String("by", tokenusage.ByUser, "group by "+strings.Join(tokenusage.Bys, ", "))
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: parley usage takes no arguments, got %q", errUsage, fs.Arg(0))
	}
	if *since <= 0 || *since > tokenusage.MaxWindow {
		return fmt.Errorf("%w: --since must be positive and at most %s (older hours have expired)", errUsage, tokenusage.MaxWindow)
	}
	if !contains(tokenusage.Bys, *by) {
		return fmt.Errorf("%w: --by must be one of %s", errUsage, strings.Join(tokenusage.Bys, ", "))
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Redis.URL == "" {
		// The embedded store lives in the serving process: there is
		// nothing another process could read.
		return errors.New("usage is kept in Redis, and REDIS_URL is not set: without it each `parley serve` keeps its counts in its own memory; set REDIS_URL to the Redis the bot uses")
	}
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
	if err != nil {
		return err
	}
	defer client.Close()
	rep, err := tokenusage.New(client, cfg.Redis.Prefix).Read(e.ctx, *since, *by)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeUsage(e, rep, agent.ModelsFrom(cfg))
}

// modelLabel names a model the way an operator knows it: its key in the
// configuration with the model it asks for, "default (gpt-4o-mini)". A key
// the configuration no longer has (a model removed since) stays bare.
func modelLabel(models agent.ModelSet, key string) string {
	if ep, ok := models.Endpoint(key); ok && ep.Name != "" && ep.Name != key {
		return key + " (" + ep.Name + ")"
	}
	return key
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// writeUsage prints a report as a table, the biggest spender first, with
// a total line.
func writeUsage(e *environment, rep tokenusage.Report, models agent.ModelSet) error {
	fmt.Fprintf(e.stdout, "Model tokens from %s to %s (UTC), by %s\n\n", rep.From.Format("2006-01-02 15:04"), rep.To.Format("2006-01-02 15:04"), rep.By)
	if len(rep.Rows) == 0 {
		fmt.Fprintln(e.stdout, "No turns in this window.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	var head []string
	switch rep.By {
	case tokenusage.ByUser:
		head = []string{"CHANNEL", "WORKSPACE", "USER"}
	case tokenusage.ByChat:
		head = []string{"CHANNEL", "WORKSPACE", "CHAT"}
	case tokenusage.ByChannel:
		head = []string{"CHANNEL"}
	case tokenusage.ByModel:
		head = []string{"MODEL"}
	}
	cols := len(head)
	fmt.Fprintln(tw, strings.Join(append(head, "TURNS", "PROMPT", "COMPLETION", "CACHED", "CACHED%", "TOTAL"), "\t")+"\t")
	line := func(names []string, r tokenusage.Row) {
		share := "-"
		if r.Prompt > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(r.Cached)/float64(r.Prompt))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t\n", strings.Join(names, "\t"), r.Turns, r.Prompt, r.Completion, r.Cached, share, r.Total())
	}
	for _, r := range rep.Rows {
		var names []string
		switch rep.By {
		case tokenusage.ByUser:
			names = []string{r.Channel, r.Workspace, r.User}
		case tokenusage.ByChat:
			names = []string{r.Channel, r.Workspace, r.Chat}
		case tokenusage.ByChannel:
			names = []string{r.Channel}
		case tokenusage.ByModel:
			names = []string{modelLabel(models, r.Model)}
		}
		for i, n := range names {
			names[i] = printable(n)
		}
		line(names, r)
	}
	total := make([]string, cols)
	total[0] = "TOTAL"
	line(total, rep.Total)
	return tw.Flush()
}

// printable keeps a platform id from writing control characters (or a
// tab that would shift the table) to the operator's terminal.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
