package admin

import (
	"fmt"
	"strings"
)

// AccountState is one account (an app of a platform: slack.accounts.hr,
// or the section's own, default) as this replica serves it.
type AccountState struct {
	Platform string
	Account  string // "default" for the section's own keys
	// Up is the adapter's readiness on this replica; Error says why it
	// is down (a refused token, a connection not open), never a secret.
	Up    bool
	Error string
	// Reached is how the platform reaches it: its routes and connection
	// ("webhooks at /slack/events/hr; Socket Mode").
	Reached string
}

// Accounts lists the accounts this replica serves, from its adapters'
// own readiness (what /readyz reports); cmd/parley implements it.
type Accounts interface {
	AccountStates() []AccountState
}

// accountView is a row of the overview's accounts: the account on this
// replica, and on the others as their heartbeats report it.
type accountView struct {
	AccountState
	// Others is its state on each other live replica that serves it.
	Others []otherReplica
}

// otherReplica is an account's state on another replica: "ID: up" or
// "ID: down (why)".
type otherReplica struct {
	Text string
	Up   bool
}

// accountViews are the overview's rows: this replica's accounts, each
// with what the other replicas' heartbeats say of it.
func accountViews(states []AccountState, reps []ReplicaInfo, this string) []accountView {
	out := make([]accountView, 0, len(states))
	for _, st := range states {
		v := accountView{AccountState: st}
		for _, rep := range reps {
			if rep.ID == this {
				continue
			}
			for _, ch := range rep.Channels {
				if ch.Name != st.Platform || accountOf(ch) != st.Account {
					continue
				}
				state := "up"
				if !ch.Ready {
					state = "down"
					if ch.Error != "" {
						state += " (" + ch.Error + ")"
					}
				}
				v.Others = append(v.Others, otherReplica{Text: fmt.Sprintf("%s: %s", rep.ID, state), Up: ch.Ready})
			}
		}
		out = append(out, v)
	}
	return out
}

// accountOf is the account a heartbeat's channel serves: a replica of
// before accounts reports none, which is the default.
func accountOf(ch ChannelHealth) string {
	if a := strings.TrimSpace(ch.Account); a != "" {
		return a
	}
	return "default"
}
