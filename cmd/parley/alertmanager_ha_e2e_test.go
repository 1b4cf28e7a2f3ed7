package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

// fireAll posts the same alerts of the DiskFull group to every
// Alertmanager's API, as Prometheus sends each alert to every member of
// an HA pair: the same labels and startsAt on each (ends, when set,
// resolves them).
func fireAll(t *testing.T, ams []string, starts, ends time.Time, instances ...string) {
	t.Helper()
	var alerts []map[string]any
	for _, inst := range instances {
		a := map[string]any{"labels": map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": inst},
			"annotations": map[string]string{"summary": "Disk almost full on " + inst}, "startsAt": starts.Format(time.RFC3339)}
		if !ends.IsZero() {
			a["endsAt"] = ends.Format(time.RFC3339)
		}
		alerts = append(alerts, a)
	}
	body, _ := json.Marshal(alerts)
	for _, am := range ams {
		resp, err := http.Post(am+"/api/v2/alerts", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s/api/v2/alerts: %d", am, resp.StatusCode)
		}
	}
}

// amPeers is how many members an Alertmanager's cluster has, by its
// status API (itself included).
func amPeers(t *testing.T, am string) int {
	t.Helper()
	resp, err := http.Get(am + "/api/v2/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Cluster struct {
			Status string `json:"status"`
			Peers  []any  `json:"peers"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return len(st.Cluster.Peers)
}

// slowLink forwards to target after delay, as a slow network between an
// Alertmanager and its replica would: a member that sent a notification
// records it (and gossips it to its peer) only once the answer is back.
func slowLink(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// counter reads one counter of s's /metrics; absent is 0.
func counter(t *testing.T, s *slackServe, series string) float64 {
	t.Helper()
	v, _ := strconv.ParseFloat(s.metric(t, series), 64)
	return v
}

// TestAlertmanagerHAPairIntoTwoReplicasPostsOnce: two real Alertmanagers
// clustered as an HA pair (gossiping their notification logs), each fed
// the same alerts and each sending to its own `parley serve` replica of
// one bot over a slow link. The pair's gossip cannot stop the copies: each
// member flushes the group while the other's send is still on its way, so
// both send every notification. Parley posts each once, all in one
// thread: the first starts it, the second alert and the resolution reply
// in it; the copies are answered 200 and counted duplicate.
func TestAlertmanagerHAPairIntoTwoReplicasPostsOnce(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	a := startSlackServeWith(t, r, model, fake, webhookConfig)
	b := startSlackServeWith(t, r, model, fake, webhookConfig)
	peerA, peerB := freeAddr(t), freeAddr(t)
	// No peer timeout: the second member does not wait for the first's
	// notification to reach it by gossip before sending its own copy, so
	// that both usually send, as a pair whose gossip lags does.
	gossip := []string{"--cluster.peer-timeout=0s", "--cluster.pushpull-interval=2s"}
	// Each member's send takes two seconds to be answered, while both
	// flush the group within milliseconds of each other.
	const link = 2 * time.Second
	amA := startAlertmanagerWith(t, slowLink(t, a.base, link), append([]string{"--cluster.listen-address=" + peerA, "--cluster.advertise-address=" + peerA, "--cluster.peer=" + peerB}, gossip...)...)
	amB := startAlertmanagerWith(t, slowLink(t, b.base, link), append([]string{"--cluster.listen-address=" + peerB, "--cluster.advertise-address=" + peerB, "--cluster.peer=" + peerA}, gossip...)...)
	ams := []string{amA, amB}
	slacktest.WaitFor(t, "the two Alertmanagers to see each other", slackDeadline, func() bool {
		return amPeers(t, amA) == 2 && amPeers(t, amB) == 2
	})
	starts := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)

	fireAll(t, ams, starts, time.Time{}, "db-1")
	slacktest.WaitFor(t, "the root post", slackDeadline, func() bool { return len(opsPosts(fake, "[FIRING:1] DiskFull")) > 0 })
	root := opsPosts(fake, "[FIRING:1] DiskFull")[0]
	if root.ThreadTS != "" {
		t.Fatalf("the first notification is not a thread's root: %+v", root)
	}
	fireAll(t, ams, starts, time.Time{}, "db-1", "db-2")
	slacktest.WaitFor(t, "the second alert in the thread", slackDeadline, func() bool { return len(opsPosts(fake, "[FIRING:2] DiskFull")) > 0 })
	fireAll(t, ams, starts, time.Now().UTC(), "db-1", "db-2")
	// The root itself is edited to show the resolution: only the posts in
	// its thread are the notifications' replies.
	inThread := func(text string) []slacktest.Post {
		var out []slacktest.Post
		for _, p := range opsPosts(fake, text) {
			if p.ThreadTS == root.TS {
				out = append(out, p)
			}
		}
		return out
	}
	slacktest.WaitFor(t, "the resolution in the thread", slackDeadline, func() bool { return len(inThread("[RESOLVED:2] DiskFull")) > 0 })

	// Every request either member sent is answered by now: the posts are
	// counted once both replicas have nothing more queued.
	requests := func(outcome string) float64 {
		series := `parley_trigger_requests_total{outcome="` + outcome + `",trigger="am"}`
		return counter(t, a, series) + counter(t, b, series)
	}
	slacktest.WaitFor(t, "three notifications posted", slackDeadline, func() bool { return requests("posted") >= 3 })
	if got := requests("posted"); got != 3 {
		t.Errorf("%v notifications posted; want 3 (firing, a new alert, resolved)", got)
	}
	roots := 0
	for _, p := range opsPosts(fake, "DiskFull") {
		if p.ThreadTS == "" {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("the first notification was posted %d times", roots)
	}
	for _, text := range []string{"[FIRING:2] DiskFull", "[RESOLVED:2] DiskFull"} {
		ps := inThread(text)
		if len(ps) != 1 {
			t.Errorf("%q: %+v, want one post in thread %s", text, ps, root.TS)
		}
	}
	for _, p := range opsPosts(fake, "DiskFull") {
		if p.TS != root.TS && p.ThreadTS != root.TS {
			t.Errorf("a post outside the group's thread: %+v", p)
		}
	}
	// Both members sent: the copies reached the other replica and were
	// acknowledged without a post.
	if got := requests("duplicate"); got < 1 {
		t.Errorf("%v copies of the pair's notifications reached Parley; want the second member's", got)
	}
	t.Logf("the HA pair sent %v duplicate notifications, each acknowledged and not posted", requests("duplicate"))
	if strings.Contains(a.stderr.String()+b.stderr.String(), "am-s3cret") {
		t.Error("a replica logged the webhook's token")
	}
	if model.RequestCount() != 0 {
		t.Error("answer: post reached the model")
	}
}
