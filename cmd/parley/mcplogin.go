package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
)

// mcpCLI is `parley mcp login NAME`: the operator's one sign-in to an MCP
// server that asks for OAuth (tools.mcp.servers.NAME.oauth, authorization
// code). It prints the authorization URL; the authorization server sends
// the browser to the admin console's /admin/mcp/oauth/callback, which
// hands the code back here through Redis; this exchanges it (the PKCE
// verifier never leaves this process) and stores the tokens in Redis,
// where every replica finds them.
func (e *environment) mcpCLI(args []string) error {
	if len(args) == 0 || args[0] != "login" {
		return fmt.Errorf("%w: parley mcp takes login NAME", errUsage)
	}
	fs := newFlagSet("mcp login", e.stderr)
	path := configFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: parley mcp login takes one server name", errUsage)
	}
	name := fs.Arg(0)
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Redis.URL == "" {
		return errors.New("the sign-in is kept in Redis, for every replica, and REDIS_URL is not set: set it to the Redis the bot uses")
	}
	client, err := sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 2)
	if err != nil {
		return err
	}
	defer client.Close()
	st, err := mcp.Login(e.ctx, mcp.FromConfig(cfg), name, mcp.LoginOptions{
		Tokens:  mcp.RedisTokens{Client: client, Prefix: cfg.Redis.Prefix},
		Getenv:  e.getenv,
		Version: version,
		Log:     slog.New(slog.DiscardHandler),
		Show: func(authURL string) {
			fmt.Fprintf(e.stdout, "Open this URL in a browser and sign in (it is valid for ten minutes):\n\n  %s\n\nWaiting for the admin console to receive the answer…\n", authURL)
		},
	})
	if errors.Is(err, mcp.ErrNoOAuth) {
		return fmt.Errorf("tools.mcp.servers.%s: %w", name, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Signed in to %s: %d tools. Every replica uses this sign-in now.\n", name, len(st.Tools))
	return nil
}
