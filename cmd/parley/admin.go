package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/parleyhq/parley/admin"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/policy"
)

// startAdmin starts the admin console when it is configured, on its own
// listener, and this replica's heartbeat, which the console of every
// replica reads. Both stop with the app.
func (a *app) startAdmin() error {
	id := a.replica
	started := time.Now().UTC().Truncate(time.Second)
	console := ""
	if a.cfg.Admin.Enabled() {
		addr, err := a.serveAdmin(id)
		if err != nil {
			return err
		}
		console = addr
	} else if a.cfg.Admin.Listen != "" && a.cfg.Admin.Listen != "off" {
		a.log.Info("admin console off: set PARLEY_ADMIN_TOKEN (or admin.trusted_header) to turn it on")
	}
	hb := &admin.Heartbeat{
		Client:   a.store.Client(),
		Prefix:   a.cfg.Redis.Prefix,
		Gatherer: a.metrics.Registry,
		Log:      a.log,
		Info: func() admin.ReplicaInfo {
			return admin.ReplicaInfo{ID: id, Host: hostname(), Version: version, Started: started,
				Channels: a.channelHealth(), MCPDown: a.toolset.down(), Console: console}
		},
	}
	ready := make(chan struct{})
	a.watchers.Go(func() { hb.Run(a.bg, ready) })
	<-ready
	return nil
}

// serveAdmin starts the console and returns the address it listens on.
func (a *app) serveAdmin(id string) (string, error) {
	srv, err := admin.New(admin.Config{
		Admin:  a.cfg.Admin,
		Redis:  a.store.Client(),
		Prefix: a.cfg.Redis.Prefix,
		Store:  a.store,
		Skills: admin.Skills{Registry: a.skills.Registry, State: a.skills.State, Reload: a.skills.Reload, Home: a.cfg.Home},
		Policy: a.policy,
		Tools:  adminTools{a.toolset},
		// The schedules and webhooks as `parley triggers list` shows them.
		Triggers: newTriggerLister(a.store.Client(), a.cfg),
		// The gateway resets and compacts as /reset and /compact do.
		Conversations: a.gateway,
		Audit:         a.ledger,
		// Each account's state on this replica, as /readyz reads it.
		Accounts: adminAccounts{a},
		Replica:  id,
		Log:      a.log,
	})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", a.cfg.Admin.Listen)
	if err != nil {
		return "", fmt.Errorf("admin console: listen on %s: %w", a.cfg.Admin.Listen, err)
	}
	hs := srv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin console stopped", "err", err)
		}
	}()
	a.onStop("admin console", func(ctx context.Context) error {
		err := hs.Shutdown(ctx)
		<-done
		return err
	})
	addr := ln.Addr().String()
	a.log.Info("admin console serving", "addr", addr, "url", "http://"+addr+"/admin/")
	return addr, nil
}

// channelHealth is each channel's readiness, for the heartbeat.
func (a *app) channelHealth() []admin.ChannelHealth {
	out := []admin.ChannelHealth{}
	for _, c := range a.channels {
		h := admin.ChannelHealth{Name: c.Channel.Name(), Ready: true, Account: adapterAccount(c.Channel)}
		if hc := c.Health; hc != nil {
			if err := hc.Ready(); err != nil {
				h.Ready, h.Error = false, err.Error()
			}
		}
		out = append(out, h)
	}
	return out
}

// adminTools lists the tools for the console as `parley tools list` and
// `parley policy explain` do.
type adminTools struct{ ts *toolset }

func (t adminTools) ToolStatuses() []admin.ToolStatus {
	rows := t.ts.rows()
	out := make([]admin.ToolStatus, len(rows))
	for i, r := range rows {
		out[i] = admin.ToolStatus{Name: r.Name, Source: r.Source, Class: r.Class, ClassRule: r.ClassRule, ServerState: r.ServerState, ServerError: r.ServerError}
	}
	return out
}

func (t adminTools) PolicyTools() []policy.ToolInfo {
	tools, _ := t.ts.policyTools()
	return tools
}

// replicaID names this process among the replicas: the host (the pod's
// name in Kubernetes) and a random suffix, since a restarted pod keeps
// its name.
func replicaID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hostname() + "-" + hex.EncodeToString(b[:])
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "parley"
	}
	return h
}

// adminAccounts lists this replica's accounts for the console's overview:
// each adapter's readiness (as /readyz reads it) and how its platform
// reaches it (as config check lists it).
type adminAccounts struct{ a *app }

func (x adminAccounts) AccountStates() []admin.AccountState {
	out := make([]admin.AccountState, 0, len(x.a.channels))
	for _, c := range x.a.channels {
		platform, account := c.Channel.Name(), adapterAccount(c.Channel)
		st := admin.AccountState{Platform: platform, Account: account, Up: true}
		if hc := c.Health; hc != nil {
			if err := hc.Ready(); err != nil {
				st.Up, st.Error = false, err.Error()
			}
		}
		if t, ok := x.a.cfg.Platforms[platform].(channels.AccountTransports); ok {
			if tr, ok := t.Transports()[account]; ok {
				st.Reached = tr.String()
			}
		}
		out = append(out, st)
	}
	return out
}

// adapterAccount is the account an adapter serves: channels.DefaultAccount
// for the section's own app, or an adapter that serves only that.
func adapterAccount(ch channels.Channel) string {
	if a, ok := ch.(channels.Accounted); ok && a.Account() != "" {
		return a.Account()
	}
	return channels.DefaultAccount
}
