package admin

import (
	"net/http"
	"slices"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/policy"
)

type policiesData struct {
	Scopes []policy.Scope
	Chosen policy.Scope
	// Report is what parley policy explain prints, in tables; nil until
	// a scope is chosen.
	Report *policy.Report
}

// IsChosen reports whether sc is the scope explained, so that the list of
// conversations seen keeps it selected.
func (d *policiesData) IsChosen(sc policy.Scope) bool { return sc == d.Chosen }

// maxScopes bounds the scopes offered, and the conversations read for them.
const maxScopes = 500

func (s *Server) policiesPage(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Policies", "policies"
	d := &policiesData{}
	inv, err := s.cfg.Store.Inventory(ctx, maxScopes)
	if err != nil {
		return "", err
	}
	seen := map[policy.Scope]bool{}
	for _, c := range inv.Conversations {
		sc := scopeOf(c.Key)
		if !seen[sc] {
			seen[sc] = true
			d.Scopes = append(d.Scopes, sc)
		}
	}
	slices.SortFunc(d.Scopes, func(a, b policy.Scope) int {
		return strings.Compare(a.Channel+"\x00"+a.Workspace+"\x00"+a.Chat, b.Channel+"\x00"+b.Workspace+"\x00"+b.Chat)
	})
	q := r.URL.Query()
	if sc := q.Get("scope"); sc != "" {
		d.Chosen = scopeOf(sc)
	} else {
		d.Chosen = policy.Scope{Channel: q.Get("channel"), Workspace: q.Get("workspace"), Chat: q.Get("chat")}
	}
	if d.Chosen.Channel != "" {
		var names []string
		for _, sk := range s.cfg.Skills.Registry.Catalog().All() {
			names = append(names, sk.Name)
		}
		rep := s.cfg.Policy.Report(d.Chosen, s.cfg.Tools.PolicyTools(), names)
		d.Report = &rep
	}
	v.Data = d
	return "policies", nil
}

// scopeOf is the policy scope of a conversation key
// (channel[/account]:workspace:chat:thread).
func scopeOf(key string) policy.Scope {
	parts := strings.SplitN(key, ":", 4)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	channel, account := channels.SplitAdapterKey(parts[0])
	return policy.Scope{Channel: channel, Account: account, Workspace: parts[1], Chat: parts[2]}
}
