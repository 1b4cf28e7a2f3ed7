package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/channels/console"
)

func (e *environment) chat(args []string) error {
	fs := newFlagSet("chat", e.stderr)
	path := configFlag(fs)
	message := fs.String("m", "", "send one message, print the reply and exit")
	conversation := fs.String("conversation", "", "continue the conversation with this id (default: a new one)")
	fs.BoolVar(&e.verbose, "verbose", false, "log every skill warning instead of one line counting them")
	cfg, err := e.parseAndLoad(fs, path, args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (quote the message: -m \"…\")", errUsage, strings.Join(fs.Args(), " "))
	}
	// The console's stdout is the conversation; logs go to stderr, and only
	// warnings unless the operator asked for more.
	if e.getenv("PARLEY_LOG_LEVEL") == "" && cfg.Log.Level == "info" {
		cfg.Log.Level = "warn"
	}
	log := newLogger(e.stderr, cfg)
	a, err := e.newApp(cfg, log)
	if err != nil {
		return err
	}
	a.gateway.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), cfg.Gateway.ShutdownTimeout)
		defer cancel()
		if err := a.close(ctx); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()

	conv := *conversation
	if conv == "" {
		conv = console.NewConversationID()
	}
	user := e.getenv("USER")
	if user == "" {
		user = "console"
	}
	ch := console.New(conv, user)
	a.gateway.Register(ch)

	if *message != "" {
		r, err := ch.Ask(e.ctx, a.gateway, *message)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, r.Text)
		return nil
	}
	return ch.REPL(e.ctx, a.gateway, e.stdin, e.stdout)
}
