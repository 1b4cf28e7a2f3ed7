package admin_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/admin"
)

// fixedAccounts are a replica's accounts, changed by the test between
// two reads of the overview.
type fixedAccounts struct {
	mu     sync.Mutex
	states []admin.AccountState
}

func (f *fixedAccounts) AccountStates() []admin.AccountState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]admin.AccountState(nil), f.states...)
}

func (f *fixedAccounts) set(states ...admin.AccountState) {
	f.mu.Lock()
	f.states = states
	f.mu.Unlock()
}

// accountRow returns the text of the overview's row of one account, its
// tags stripped, or "" when the overview has none.
func accountRow(body, platform, account string) string {
	for _, row := range regexp.MustCompile(`(?s)<tr class="account">(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		text := html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(row[1], " "))
		fields := strings.Fields(text)
		if len(fields) >= 2 && fields[0] == platform && fields[1] == account {
			return strings.Join(fields, " ")
		}
	}
	return ""
}

// TestTheOverviewShowsEachAccount: the overview lists each account of
// the replica serving it (platform, account, how it is reached), up or
// visibly down with why, as its adapters report it at the moment of the
// request, and each other replica's view of the same account from its
// heartbeat; the replicas' table names the account of each adapter. The
// adapters' words are data: markup in them is shown, not run. Signed
// out, none of it shows.
func TestTheOverviewShowsEachAccount(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	accounts := &fixedAccounts{}
	up := admin.AccountState{Platform: "slack", Account: "default", Up: true, Reached: "webhooks at /slack/events, /slack/commands, /slack/interactions"}
	hr := admin.AccountState{Platform: "slack", Account: "hr", Up: true, Reached: "Socket Mode"}
	accounts.set(up, hr)
	a := w.replica(t, "a", options{accounts: accounts, channels: []admin.ChannelHealth{{Name: "slack", Ready: true}, {Name: "slack", Account: "hr", Ready: true}}})
	w.replica(t, "b", options{channels: []admin.ChannelHealth{
		{Name: "slack", Ready: true},
		{Name: "slack", Account: "hr", Ready: false, Error: "token refused: token_revoked <script>alert(1)</script>"},
	}})
	c := a.client(t)
	if got := c.get("/admin/"); got.status == http.StatusOK || strings.Contains(got.body, "Socket Mode") {
		t.Fatalf("signed out, the overview answers %d:\n%s", got.status, got.body)
	}
	c.signIn()

	var body string
	poll(t, "the overview to show replica b's view of hr", func() bool {
		body = c.get("/admin/").body
		return strings.Contains(accountRow(body, "slack", "hr"), "b: down")
	})
	for _, tt := range []struct{ account, want string }{
		{"default", "slack default up webhooks at /slack/events, /slack/commands, /slack/interactions b: up"},
		{"hr", "slack hr up Socket Mode b: down (token refused: token_revoked <script>alert(1)</script>)"},
	} {
		if got := accountRow(body, "slack", tt.account); got != tt.want {
			t.Errorf("the row of slack/%s is %q, want %q", tt.account, got, tt.want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("an adapter's error reached the page as markup")
	}
	has(t, "the replicas' table", body, "slack/hr: down (token refused: token_revoked")

	// hr's token is refused on this replica too: the next request shows
	// it down here, with why, marked as bad.
	accounts.set(up, admin.AccountState{Platform: "slack", Account: "hr", Error: "token refused: token_revoked", Reached: "Socket Mode"})
	body = c.get("/admin/").body
	if got, want := accountRow(body, "slack", "hr"), "slack hr down (token refused: token_revoked) Socket Mode"; !strings.HasPrefix(got, want) {
		t.Errorf("the row of slack/hr is %q, want it to start %q", got, want)
	}
	if !strings.Contains(body, `<span class="health bad">down</span> (token refused: token_revoked)`) {
		t.Errorf("the down account is not marked bad:\n%s", body)
	}
}
