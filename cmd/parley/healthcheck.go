package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// healthcheck is for images without a shell or curl: it asks the local
// server's /healthz (or /readyz with --ready) and exits non-zero unless it
// answers 200.
func (e *environment) healthcheck(args []string) error {
	fs := newFlagSet("healthcheck", e.stderr)
	addr := fs.String("addr", "", "address of the server (default: PARLEY_LISTEN, else :8080)")
	ready := fs.Bool("ready", false, "check /readyz instead of /healthz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	target := *addr
	if target == "" {
		target = e.getenv("PARLEY_LISTEN")
	}
	if target == "" {
		target = ":8080"
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("healthcheck: %q is not host:port", target)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // a server listening on every address answers on loopback
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", path, resp.Status)
	}
	fmt.Fprintf(e.stdout, "%s ok\n", path)
	return nil
}
