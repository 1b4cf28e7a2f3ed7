package config_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

func TestAdminConfig(t *testing.T) {
	const token = "0123456789abcdef-long-enough"
	bad := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"short token", "", map[string]string{"PARLEY_ADMIN_TOKEN": "short"}, "admin.token"},
		{"bad listen", "", map[string]string{"PARLEY_ADMIN_LISTEN": "nope"}, "admin.listen"},
		{"header without proxies", "admin:\n  trusted_header: X-Forwarded-User\n", nil, "admin.trusted_proxies"},
		{"bad proxy", "admin:\n  trusted_header: X-Forwarded-User\n  trusted_proxies: [10.0.0.0/33]\n", nil, "admin.trusted_proxies[0]"},
		{"authorization as the user header", "admin:\n  trusted_header: authorization\n  trusted_proxies: [10.0.0.1]\n", nil, "admin.trusted_header"},
		{"no session ttl", "admin:\n  session_ttl: 0s\n", nil, "admin.session_ttl"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tc.yaml), env(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "short") && tc.name == "short token" {
				t.Fatal("the error shows the token")
			}
		})
	}

	cfg, err := config.Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Listen != config.DefaultAdminListen || cfg.Admin.Enabled() {
		t.Fatalf("default: %+v; want listen %s and off without a way to sign in", cfg.Admin, config.DefaultAdminListen)
	}
	cfg, err = config.Load(writeFile(t, "admin:\n  trusted_header: X-Forwarded-User\n  trusted_proxies: [10.0.0.0/8, 192.168.1.7, '::1']\n  grafana_url: http://grafana:3000\n"),
		env(map[string]string{"PARLEY_ADMIN_TOKEN": token, "PARLEY_ADMIN_LISTEN": "0.0.0.0:9091"}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Admin.Enabled() || cfg.Admin.Listen != "0.0.0.0:9091" || cfg.Admin.Token.Reveal() != token || len(cfg.Admin.Proxies()) != 3 {
		t.Fatalf("loaded %+v", cfg.Admin)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), token) || !strings.Contains(string(out), "trusted_header: X-Forwarded-User") {
		t.Fatalf("config check prints:\n%s", out)
	}
	cfg, err = config.Load(writeFile(t, "admin:\n  listen: ''\n"), env(map[string]string{"PARLEY_ADMIN_TOKEN": token}))
	if err != nil || cfg.Admin.Enabled() {
		t.Fatalf("listen '': %+v, %v; want off", cfg.Admin, err)
	}
}
