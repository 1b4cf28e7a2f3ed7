package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
)

// auditCLI is `parley audit`: the ledger of write-tool calls, approvals
// and console changes, newest first, read from the Redis the replicas
// share.
func (e *environment) auditCLI(args []string) error {
	fs := newFlagSet("audit", e.stderr)
	path := configFlag(fs)
	since := fs.String("since", "24h", "how far back to look (at most audit.retention)")
	user := fs.String("user", "", "only the entries of this user, as asker or approver (a platform id)")
	tool := fs.String("tool", "", "only the entries of this tool")
	limit := fs.String("limit", "", fmt.Sprintf("the most entries shown (default %d, at most %d)", audit.DefaultLimit, audit.MaxLimit))
	asJSON := fs.Bool("json", false, "print JSON, one entry a line, instead of a table")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: parley audit takes no arguments, got %q", errUsage, fs.Arg(0))
	}
	f, err := audit.ParseFilter(*since, *user, *tool, *limit)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Redis.URL == "" {
		return errors.New("the audit ledger is kept in Redis, and REDIS_URL is not set: without it each `parley serve` keeps its ledger in its own memory; set REDIS_URL to the Redis the bot uses")
	}
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
	if err != nil {
		return err
	}
	defer client.Close()
	ledger := audit.New(client, audit.Options{Prefix: cfg.Redis.Prefix, Retention: audit.FromConfig(cfg).Retention})
	entries, err := ledger.Query(e.ctx, f)
	if errors.Is(err, audit.ErrFilter) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, en := range entries {
			if err := enc.Encode(en); err != nil {
				return err
			}
		}
		return nil
	}
	return writeAudit(e, entries)
}

// writeAudit prints entries as a table, every field made printable: the
// ids and previews come from platforms, users and models.
func writeAudit(e *environment, entries []audit.Entry) error {
	if len(entries) == 0 {
		fmt.Fprintln(e.stdout, "No entries in this window.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tKIND\tCHANNEL\tCONVERSATION\tUSER\tTOOL\tAPPROVER\tACTION\tOUTCOME\tDURATION\tARGUMENTS")
	for _, en := range entries {
		d := "-"
		if en.Duration > 0 {
			d = en.Duration.Round(time.Millisecond).String()
		}
		what := en.Preview
		if en.Target != "" {
			what = en.Target
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", en.Time.UTC().Format("2006-01-02 15:04:05"),
			printable(en.Kind), printable(en.Channel), printable(en.Conversation), printable(en.User), printable(en.Tool),
			printable(en.Approver), printable(en.Action), printable(en.Outcome), d, printable(what))
	}
	return tw.Flush()
}
