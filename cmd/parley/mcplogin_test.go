package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/redistest"
)

// parley mcp login refuses what it cannot do, saying why, before any
// browser is involved.
func TestMCPLoginRefusals(t *testing.T) {
	r := redistest.New(t)
	cfg := writeConfig(t, `
tools:
  mcp:
    servers:
      plain:
        url: https://mcp.example/mcp
      machine:
        url: https://mcp.example/mcp
        oauth:
          grant: client_credentials
          client_id: parley
          client_secret: ${MACHINE_SECRET}
`)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"no subcommand", []string{"mcp"}, nil, 2, "parley mcp takes login NAME"},
		{"no name", []string{"mcp", "login", "--config", cfg}, nil, 2, "takes one server name"},
		{"no redis", []string{"mcp", "login", "--config", cfg, "plain"}, nil, 1, "REDIS_URL is not set"},
		{"unknown server", []string{"mcp", "login", "--config", cfg, "nope"}, map[string]string{"REDIS_URL": r.URL}, 1, `no server "nope"`},
		{"no oauth", []string{"mcp", "login", "--config", cfg, "plain"}, map[string]string{"REDIS_URL": r.URL}, 1, "tools.mcp.servers.plain: the server has no oauth: section"},
		{"machine account", []string{"mcp", "login", "--config", cfg, "machine"}, map[string]string{"REDIS_URL": r.URL}, 1, "authorization code grant"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb, mapEnv(tc.env))
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, errb.String(), tc.code, tc.want)
		}
	}
}
