package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parleyhq/parley/admin"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
)

// accountAdapter is an adapter of one account whose readiness the test
// sets.
type accountAdapter struct {
	platform, account string
	down              error
}

func (a *accountAdapter) Name() string    { return a.platform }
func (a *accountAdapter) Account() string { return a.account }
func (a *accountAdapter) Ready() error    { return a.down }
func (a *accountAdapter) Send(context.Context, channels.Message, channels.Reply) error {
	return nil
}

// TestReadinessNamesEachDownAccount: /readyz's verdict over the
// adapters. One account down beside another of its platform that serves
// leaves the replica ready and is named as degraded (slack/hr: why);
// every account of a platform down makes it unready, naming each; the
// console's accounts say the same, with how each is reached.
func TestReadinessNamesEachDownAccount(t *testing.T) {
	refused := errors.New("token refused: token_revoked")
	cfg, err := config.Load(writeConfig(t, "slack:\n  bot_token: xoxb-ops\n  signing_secret: ops-secret\n  accounts:\n    hr: {bot_token: xoxb-hr, app_token: xapp-hr}\n"),
		mapEnv(map[string]string{"OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	ops := &accountAdapter{platform: "slack"}
	hr := &accountAdapter{platform: "slack", account: "hr"}
	a := &app{cfg: cfg}
	for _, ch := range []*accountAdapter{ops, hr} {
		a.channels = append(a.channels, channels.CapabilitiesOf(ch))
	}

	tests := []struct {
		name          string
		ops, hr       error
		wantDown      []string // in the error that makes the replica unready
		wantDegraded  []string
		wantConsoleUp map[string]bool
	}{
		{"both up", nil, nil, nil, nil, map[string]bool{"default": true, "hr": true}},
		{"hr down", nil, refused, nil, []string{"slack/hr: token refused: token_revoked"}, map[string]bool{"default": true, "hr": false}},
		{"every app down", refused, refused, []string{"slack: token refused", "slack/hr: token refused"}, nil, map[string]bool{"default": false, "hr": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops.down, hr.down = tt.ops, tt.hr
			down, degraded := a.channelsReady()
			if (down != nil) != (len(tt.wantDown) > 0) {
				t.Fatalf("down = %v, want one naming %v", down, tt.wantDown)
			}
			for _, w := range tt.wantDown {
				if !strings.Contains(down.Error(), w) {
					t.Errorf("down = %q, want it to name %q", down, w)
				}
			}
			if strings.Join(degraded, "|") != strings.Join(tt.wantDegraded, "|") {
				t.Errorf("degraded = %q, want %q", degraded, tt.wantDegraded)
			}
			states := adminAccounts{a}.AccountStates()
			want := map[string]admin.AccountState{
				"default": {Platform: "slack", Account: "default", Up: tt.wantConsoleUp["default"], Reached: "webhooks at /slack/events, /slack/commands, /slack/interactions"},
				"hr":      {Platform: "slack", Account: "hr", Up: tt.wantConsoleUp["hr"], Reached: "Socket Mode"},
			}
			if len(states) != len(want) {
				t.Fatalf("the console's accounts: %+v", states)
			}
			for _, st := range states {
				w := want[st.Account]
				if !w.Up {
					w.Error = refused.Error()
				}
				if st != w {
					t.Errorf("the console's %s: %+v, want %+v", st.Account, st, w)
				}
			}
		})
	}
}
