package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/parleyhq/parley/config"
)

// healthcheck is for images without a shell or curl: it asks the local
// server's /healthz (or /readyz with --ready) and exits non-zero unless it
// answers 200. Without --addr it asks the address serve listens on: the
// configuration's listen, read as serve reads it (--config or
// PARLEY_CONFIG, then PARLEY_LISTEN), so a port set in the file is probed
// where it is.
func (e *environment) healthcheck(args []string) error {
	fs := newFlagSet("healthcheck", e.stderr)
	addr := fs.String("addr", "", "address of the server (default: listen of the configuration, as serve reads it)")
	path := configFlag(fs)
	ready := fs.Bool("ready", false, "check /readyz instead of /healthz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	target := *addr
	if target == "" {
		cfg, err := config.Load(*path, e.getenv)
		if err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
		target = cfg.Listen
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("healthcheck: %q is not host:port", target)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // a server listening on every address answers on loopback
	}
	probe := "/healthz"
	if *ready {
		probe = "/readyz"
	}
	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+probe, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", probe, resp.Status)
	}
	fmt.Fprintf(e.stdout, "%s ok\n", probe)
	return nil
}
