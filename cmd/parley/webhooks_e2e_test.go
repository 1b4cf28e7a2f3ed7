package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

// webhookConfig is the triggers: section of an Alertmanager webhook
// posting to the ops channel of the fake Slack.
const webhookConfig = `triggers:
  webhooks:
    am:
      kind: alertmanager
      token: am-s3cret
      to: {platform: slack, workspace: ` + slacktest.TeamID + `, chat: C-OPS}
`

// amNotification is an Alertmanager v4 notification of the DiskFull
// group with the alerts of instances.
func amNotification(status string, instances ...string) []byte {
	var alerts []map[string]any
	for _, inst := range instances {
		alerts = append(alerts, map[string]any{"status": status,
			"labels":      map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": inst},
			"annotations": map[string]string{"summary": "Disk almost full on " + inst},
			"startsAt":    "2026-12-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": "fp-" + inst})
	}
	body, _ := json.Marshal(map[string]any{"version": "4", "groupKey": `{}:{alertname="DiskFull"}`, "status": status,
		"receiver": "parley", "groupLabels": map[string]string{"alertname": "DiskFull"},
		"commonLabels": map[string]string{"alertname": "DiskFull", "severity": "critical"}, "alerts": alerts})
	return body
}

// postHook posts body to base's /hooks/am with token and returns the status.
func postHook(t *testing.T, base, token string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/hooks/am", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	status, _ := slacktest.Do(t, req)
	return status
}

// opsPosts are the fake Slack's posts in C-OPS whose text has substr.
func opsPosts(fake *slacktest.Server, substr string) []slacktest.Post {
	var out []slacktest.Post
	for _, p := range fake.Posts() {
		if p.Channel == "C-OPS" && strings.Contains(p.Text, substr) {
			out = append(out, p)
		}
	}
	return out
}

func TestAlertGroupIsOneSlackThreadAcrossTwoReplicasAndHAPeers(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	a := startSlackServeWith(t, r, model, fake, webhookConfig)
	b := startSlackServeWith(t, r, model, fake, webhookConfig)

	if got := postHook(t, a.base, "", amNotification("firing", "db-1")); got != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d", got)
	}
	// The HA pair sends the same notification, one to each replica.
	for _, base := range []string{a.base, b.base} {
		if got := postHook(t, base, "am-s3cret", amNotification("firing", "db-1")); got != 200 {
			t.Fatalf("firing: %d", got)
		}
	}
	slacktest.WaitFor(t, "the root post", slackDeadline, func() bool { return len(opsPosts(fake, "[FIRING:1] DiskFull")) > 0 })
	root := opsPosts(fake, "[FIRING:1] DiskFull")[0]
	if root.ThreadTS != "" {
		t.Fatalf("the first notification is not a thread's root: %+v", root)
	}
	if got := postHook(t, b.base, "am-s3cret", amNotification("firing", "db-1", "db-2")); got != 200 {
		t.Fatalf("second: %d", got)
	}
	if got := postHook(t, a.base, "am-s3cret", amNotification("resolved", "db-1", "db-2")); got != 200 {
		t.Fatalf("resolved: %d", got)
	}
	inThread := func(text string) (n int) {
		for _, p := range opsPosts(fake, text) {
			if p.ThreadTS == root.TS {
				n++
			}
		}
		return n
	}
	slacktest.WaitFor(t, "the resolution in the thread, and the root edited", slackDeadline, func() bool {
		return inThread("[RESOLVED:2] DiskFull") > 0 && len(fake.Edits()) > 0
	})
	for _, text := range []string{"[FIRING:2] DiskFull", "[RESOLVED:2] DiskFull"} {
		if n := inThread(text); n != 1 {
			t.Fatalf("%q: %d posts in thread %s, want one", text, n, root.TS)
		}
	}
	// The root post now shows the resolution (Posts shows each post as
	// it stands): the HA pair's first notification was posted once.
	if edits := fake.Edits(); len(edits) != 1 || edits[0].TS != root.TS {
		t.Fatalf("edits %+v; want the root edited once", edits)
	}
	if n := len(opsPosts(fake, "DiskFull")); n != 3 {
		t.Fatalf("%d posts of the group; want the root and two replies", n)
	}
	if v := a.metric(t, `parley_trigger_requests_total{outcome="unauthorized",trigger="am"}`); v != "1" {
		t.Fatalf("unauthorized = %q", v)
	}
	if model.RequestCount() != 0 {
		t.Fatal("answer: post reached the model")
	}
}

// startAlertmanager runs Debian's prometheus-alertmanager with a webhook
// receiver pointed at hooks (with the bearer token), grouping fast, with
// no cluster, and returns its base URL. Without it the test is skipped,
// saying so.
func startAlertmanager(t *testing.T, hooks string) string {
	t.Helper()
	return startAlertmanagerWith(t, hooks, "--cluster.listen-address=")
}

// startAlertmanagerWith is startAlertmanager with the cluster flags given
// (an HA pair's --cluster.listen-address and --cluster.peer).
func startAlertmanagerWith(t *testing.T, hooks string, cluster ...string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		bin, err = exec.LookPath("alertmanager")
	}
	if err != nil {
		t.Skip("prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager; .ci/run installs it): SKIPPING the real Alertmanager test")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`route:
  receiver: parley
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: parley
    webhook_configs:
      - url: %s/hooks/am
        send_resolved: true
        http_config:
          authorization: {type: Bearer, credentials: am-s3cret}
`, hooks)
	path := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"--config.file=" + path, "--storage.path=" + dir, "--web.listen-address=" + addr, "--log.level=warn"}, cluster...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("alertmanager:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	waitFor(t, base+"/-/ready", &logs)
	return base
}

// fire posts alerts of the DiskFull group to Alertmanager's API; ends, when
// set, resolves them.
func fire(t *testing.T, am string, ends time.Time, instances ...string) {
	t.Helper()
	var alerts []map[string]any
	for _, inst := range instances {
		a := map[string]any{"labels": map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": inst},
			"annotations": map[string]string{"summary": "Disk almost full on " + inst}, "startsAt": time.Now().Add(-time.Minute).Format(time.RFC3339)}
		if !ends.IsZero() {
			a["endsAt"] = ends.Format(time.RFC3339)
		}
		alerts = append(alerts, a)
	}
	body, _ := json.Marshal(alerts)
	resp, err := http.Post(am+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /api/v2/alerts: %d", resp.StatusCode)
	}
}

func TestRealAlertmanagerFiringAndResolvedReachOneSlackThread(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServeWith(t, r, model, fake, webhookConfig)
	am := startAlertmanager(t, srv.base)

	fire(t, am, time.Time{}, "db-1")
	slacktest.WaitFor(t, "the root post", slackDeadline, func() bool { return len(opsPosts(fake, "DiskFull")) > 0 })
	root := opsPosts(fake, "DiskFull")[0]
	if root.ThreadTS != "" || !strings.Contains(root.Text, "FIRING") {
		t.Fatalf("root = %+v", root)
	}
	fire(t, am, time.Time{}, "db-1", "db-2")
	slacktest.WaitFor(t, "the second alert in the thread", slackDeadline, func() bool {
		for _, p := range opsPosts(fake, "db-2") {
			if p.ThreadTS == root.TS {
				return true
			}
		}
		return false
	})
	fire(t, am, time.Now(), "db-1", "db-2")
	slacktest.WaitFor(t, "the resolution in the thread", slackDeadline, func() bool {
		for _, p := range opsPosts(fake, "RESOLVED") {
			if p.ThreadTS == root.TS {
				return true
			}
		}
		return false
	})
	// The root itself now shows the group resolved: edited once.
	slacktest.WaitFor(t, "the root edited to show the resolution", slackDeadline, func() bool { return len(fake.Edits()) > 0 })
	edits := fake.Edits()
	if len(edits) != 1 || edits[0].TS != root.TS || edits[0].Channel != "C-OPS" || !strings.Contains(edits[0].Text, "[RESOLVED:2] DiskFull") {
		t.Fatalf("edits %+v; want the root %s edited once to show RESOLVED", edits, root.TS)
	}
	for _, p := range opsPosts(fake, "DiskFull") {
		if p.TS != root.TS && p.ThreadTS != root.TS {
			t.Fatalf("a post outside the group's thread: %+v", p)
		}
		if p.TS == root.TS && (!strings.HasPrefix(p.Text, "✅ *[RESOLVED:2] DiskFull*") || strings.Contains(p.Text, "FIRING")) {
			t.Fatalf("the root shows %q; want the resolution, in mrkdwn", p.Text)
		}
	}
}
