package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/slack/slacktest"
)

const adminToken = "e2e-admin-token-0123456789"

// adminGet fetches a console page with the bearer token.
func adminGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminConsoleAcrossReplicas(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := c.start(t, "PARLEY_ADMIN_TOKEN="+adminToken, "PARLEY_ADMIN_LISTEN="+addrA)
	b := c.start(t, "PARLEY_ADMIN_TOKEN="+adminToken, "PARLEY_ADMIN_LISTEN="+addrB)
	consoleA, consoleB := "http://"+addrA, "http://"+addrB

	// The console is on its own listener, never on the webhook port.
	if status, _ := adminGet(t, a.base, "/admin/"); status != http.StatusNotFound {
		t.Fatalf("/admin/ on the webhook port: %d, want 404", status)
	}
	replicas := func(base string) int {
		_, body := adminGet(t, base, "/admin/")
		return strings.Count(body, `<tr class="replica">`)
	}
	slacktest.WaitFor(t, "both replicas on the overview", 10*time.Second, func() bool { return replicas(consoleA) == 2 })
	if status, body := adminGet(t, consoleA, "/admin/tools"); status != http.StatusOK || !strings.Contains(body, "web_fetch") {
		t.Fatalf("tools page: %d", status)
	}

	// A skill turned off on one replica's console shows on the other's.
	req, _ := http.NewRequest("POST", consoleA+"/admin/skills", strings.NewReader(url.Values{"action": {"off"}, "skill": {"web-access"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("turn web-access off: %d", resp.StatusCode)
	}
	changed := time.Now()
	slacktest.WaitFor(t, "replica b to show web-access disabled", 10*time.Second, func() bool {
		_, body := adminGet(t, consoleB, "/admin/")
		return strings.Contains(body, `<span class="disabled-skill">web-access</span>`)
	})
	t.Logf("replica b showed the change %v after replica a made it", time.Since(changed).Round(time.Millisecond))
	if !strings.Contains(a.stderr.String(), `audit: admin console change`) || !strings.Contains(a.stderr.String(), `target=web-access`) {
		t.Fatal("the change is not in replica a's audit log")
	}

	// A replica that stops leaves the overview at once.
	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.exited
	slacktest.WaitFor(t, "replica b to leave the overview", 5*time.Second, func() bool { return replicas(consoleA) == 1 })
}

func TestAdminConsoleIsOffWithoutAWayToSignIn(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	c := newCluster(t)
	a := c.start(t)
	if !strings.Contains(a.stderr.String(), "admin console off") {
		t.Fatalf("no word that the console is off:\n%s", a.stderr.String())
	}
	if strings.Contains(a.stderr.String(), "admin console serving") {
		t.Fatal("the console serves without a token")
	}
}
