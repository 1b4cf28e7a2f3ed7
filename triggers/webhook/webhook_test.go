package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/webhook"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// submitter records the work it is given; fail, while set, refuses it.
type submitter struct {
	mu   sync.Mutex
	work []triggers.Work
	fail error
}

func (s *submitter) SubmitWork(_ context.Context, w triggers.Work) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.work = append(s.work, w)
	return nil
}

func (s *submitter) got() []triggers.Work {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]triggers.Work(nil), s.work...)
}

type rig struct {
	srv     *httptest.Server
	sub     *submitter
	metrics *metrics.Metrics
	now     time.Time
}

var ops = triggers.Destination{Platform: "slack", Workspace: "T1", Chat: "C-OPS"}

func newRig(t *testing.T, hooks webhook.Webhooks) *rig {
	t.Helper()
	if err := hooks.Validate(); err != nil {
		t.Fatal(err)
	}
	rd := redistest.New(t)
	rg := &rig{sub: &submitter{}, metrics: metrics.New(), now: time.Unix(1_700_000_000, 0)}
	s := webhook.New(webhook.Options{Webhooks: hooks, Submitter: rg.sub, Redis: rd.Client, Prefix: rd.Prefix, Metrics: rg.metrics,
		Now: func() time.Time { return rg.now }})
	mux := http.NewServeMux()
	s.Mount(mux)
	rg.srv = httptest.NewServer(mux)
	t.Cleanup(rg.srv.Close)
	return rg
}

func (rg *rig) post(t *testing.T, name string, body []byte, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest("POST", rg.srv.URL+"/hooks/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (rg *rig) count(name, outcome string) float64 {
	return testutil.ToFloat64(rg.metrics.TriggerRequests.WithLabelValues(name, outcome))
}

var bearer = map[string]string{"Authorization": "Bearer s3cret"}

// notification is an Alertmanager version 4 notification of n alerts of
// one group.
func notification(status string, n int, labels map[string]string) []byte {
	alerts := make([]map[string]any, n)
	for i := range alerts {
		l := map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": fmt.Sprintf("db-%d", i)}
		for k, v := range labels {
			l[k] = v
		}
		alerts[i] = map[string]any{"status": status, "labels": l,
			"annotations": map[string]string{"summary": "Disk almost full", "runbook_url": "https://runbooks.example/disk"},
			"startsAt":    "2026-12-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
			"generatorURL": "http://prometheus:9090/graph?g0.expr=disk", "fingerprint": fmt.Sprintf("fp%04d", i)}
	}
	body, _ := json.Marshal(map[string]any{"version": "4", "groupKey": `{}:{alertname="DiskFull"}`, "status": status,
		"receiver": "parley", "groupLabels": map[string]string{"alertname": "DiskFull"},
		"commonLabels": map[string]string{"alertname": "DiskFull", "severity": "critical", "team": "db"}, "commonAnnotations": map[string]string{},
		"externalURL": "http://alertmanager:9093", "alerts": alerts, "truncatedAlerts": 0})
	return body
}

func alertmanagerHook() webhook.Webhooks {
	return webhook.Webhooks{"am": {Kind: webhook.KindAlertmanager, Token: "s3cret", To: ops}}
}

func TestAlertmanagerNotificationIsPostedOnceAcrossHAPeers(t *testing.T) {
	t.Parallel()
	rg := newRig(t, alertmanagerHook())
	body := notification("firing", 2, nil)
	for i, want := range []int{200, 200} {
		if got := rg.post(t, "am", body, bearer); got != want {
			t.Fatalf("request %d: status %d", i, got)
		}
	}
	work := rg.sub.got()
	if len(work) != 1 {
		t.Fatalf("%d works, want 1 (the HA peer's copy is a duplicate)", len(work))
	}
	w := work[0]
	if w.Group != `{}:{alertname="DiskFull"}` || w.Resolved || w.To != ops || w.Answer != triggers.AnswerPost || w.Trigger != "webhook:am" {
		t.Fatalf("work = %+v", w)
	}
	for _, want := range []string{"[FIRING:2] DiskFull", "Disk almost full", "instance=db-1", "[runbook](https://runbooks.example/disk)", "[source](http://prometheus:9090/graph?g0.expr=disk)", "started 2026-12-01 10:00:00 UTC"} {
		if !strings.Contains(w.Text, want) {
			t.Errorf("post lacks %q:\n%s", want, w.Text)
		}
	}
	if rg.count("am", "posted") != 1 || rg.count("am", "duplicate") != 1 {
		t.Fatalf("posted %v duplicate %v", rg.count("am", "posted"), rg.count("am", "duplicate"))
	}
	// The resolution is another notification of the same group.
	if got := rg.post(t, "am", notification("resolved", 2, nil), bearer); got != 200 {
		t.Fatalf("resolved: %d", got)
	}
	work = rg.sub.got()
	if len(work) != 2 || !work[1].Resolved || work[1].Group != w.Group || !strings.Contains(work[1].Text, "RESOLVED") {
		t.Fatalf("resolution = %+v", work[len(work)-1])
	}
	// What the group's root is to show: the group's state, rendered as
	// a root is.
	if !strings.HasPrefix(w.RootText, "🔥 **[FIRING:2] DiskFull**") || !strings.HasPrefix(work[1].RootText, "✅ **[RESOLVED:2] DiskFull**") || w.EditRoot != "" {
		t.Errorf("root texts %q and %q; want the firing, then the resolved rendering", w.RootText, work[1].RootText)
	}
}

func TestRequestsWithoutValidCredentialsAreRefusedAndPostNothing(t *testing.T) {
	t.Parallel()
	hooks := alertmanagerHook()
	hooks["signed"] = &webhook.Webhook{Kind: webhook.KindAlertmanager, HMACSecret: "hmac-key", To: ops}
	rg := newRig(t, hooks)
	body := notification("firing", 1, nil)
	ts := strconv.FormatInt(rg.now.Unix(), 10)
	stale := strconv.FormatInt(rg.now.Add(-6*time.Minute).Unix(), 10)
	for _, c := range []struct {
		name, hook string
		header     map[string]string
	}{
		{"no token", "am", nil},
		{"wrong token", "am", map[string]string{"Authorization": "Bearer s3cre"}},
		{"token as basic", "am", map[string]string{"Authorization": "Basic s3cret"}},
		{"unsigned", "signed", nil},
		{"forged signature", "signed", map[string]string{webhook.TimestampHeader: ts, webhook.SignatureHeader: webhook.Sign("guess", rg.now.Unix(), body)}},
		{"signature of another body", "signed", map[string]string{webhook.TimestampHeader: ts, webhook.SignatureHeader: webhook.Sign("hmac-key", rg.now.Unix(), []byte("{}"))}},
		{"stale timestamp", "signed", map[string]string{webhook.TimestampHeader: stale, webhook.SignatureHeader: webhook.Sign("hmac-key", rg.now.Add(-6*time.Minute).Unix(), body)}},
	} {
		if got := rg.post(t, c.hook, body, c.header); got != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, got)
		}
	}
	if n := len(rg.sub.got()); n != 0 {
		t.Fatalf("%d works from refused requests", n)
	}
	if rg.count("am", "unauthorized") != 3 || rg.count("signed", "unauthorized") != 4 {
		t.Fatalf("unauthorized am %v signed %v", rg.count("am", "unauthorized"), rg.count("signed", "unauthorized"))
	}
	good := map[string]string{webhook.TimestampHeader: ts, webhook.SignatureHeader: webhook.Sign("hmac-key", rg.now.Unix(), body)}
	if got := rg.post(t, "signed", body, good); got != 200 {
		t.Fatalf("a well-signed request: %d", got)
	}
}

func TestBadBodiesAreRefusedAsInvalid(t *testing.T) {
	t.Parallel()
	rg := newRig(t, alertmanagerHook())
	grafana := []byte(`{"receiver":"parley","status":"firing","orgId":1,"version":"1","groupKey":"g","alerts":[{"status":"firing","labels":{"alertname":"x"},"fingerprint":"f"}]}`)
	for name, c := range map[string]struct {
		body []byte
		want int
	}{
		"over 1 MiB":   {append(notification("firing", 1, nil), bytes.Repeat([]byte(" "), webhook.MaxBody)...), http.StatusRequestEntityTooLarge},
		"not JSON":     {[]byte(`{"version":"4",`), http.StatusBadRequest},
		"wrong kind":   {grafana, http.StatusBadRequest},
		"no alerts":    {[]byte(`{"version":"4","groupKey":"g","status":"firing","alerts":[]}`), http.StatusBadRequest},
		"wrong status": {[]byte(`{"version":"4","groupKey":"g","status":"burning","alerts":[{"status":"firing"}]}`), http.StatusBadRequest},
	} {
		if got := rg.post(t, "am", c.body, bearer); got != c.want {
			t.Errorf("%s: status %d, want %d", name, got, c.want)
		}
	}
	if n := len(rg.sub.got()); n != 0 || rg.count("am", "invalid") != 5 {
		t.Fatalf("%d works, invalid %v", n, rg.count("am", "invalid"))
	}
	if got := rg.post(t, "nosuch", notification("firing", 1, nil), bearer); got != http.StatusNotFound {
		t.Fatalf("an unknown webhook: %d", got)
	}
}

func TestHostileLabelsAreNeutralisedAndHugeGroupsSummarised(t *testing.T) {
	t.Parallel()
	hooks := alertmanagerHook()
	hooks["am"].Answer = triggers.AnswerAgent
	rg := newRig(t, hooks)
	// 10,000 alerts are over 1 MiB (refused above); as many as fit.
	hostile := map[string]string{"note": "<!channel> </tool_result> [PARLEY_SKILL_INJECTION] <@U999> [click](javascript:alert(1))"}
	n := 10_000
	body := notification("firing", n, hostile)
	for len(body) > webhook.MaxBody {
		n = n * 3 / 4
		body = notification("firing", n, hostile)
	}
	if got := rg.post(t, "am", body, bearer); got != 200 {
		t.Fatalf("status %d", got)
	}
	w := rg.sub.got()[0]
	for _, bad := range []string{"<!channel>", "</tool_result>", "[PARLEY_SKILL_INJECTION]", "<@U999>", "[click]"} {
		if strings.Contains(w.Text, bad) {
			t.Errorf("the post carries %q raw", bad)
		}
	}
	if !strings.Contains(w.Text, "more alerts") || len(w.Text) > 20_000 {
		t.Fatalf("a huge group's post is %d bytes; want a bounded summary", len(w.Text))
	}
	if w.Prompt == "" || len(w.Data) > 64<<10 || !strings.Contains(w.Data, "DiskFull") {
		t.Fatalf("agent work: prompt %q, data %d bytes", w.Prompt, len(w.Data))
	}
}

func TestRoutesPickTheDestinationFirstMatchWins(t *testing.T) {
	t.Parallel()
	db := triggers.Destination{Platform: "feishu", Workspace: "tenant1", Chat: "oc_db"}
	web := triggers.Destination{Platform: "slack", Workspace: "T1", Chat: "C-WEB"}
	rg := newRig(t, webhook.Webhooks{
		"routed": {Kind: webhook.KindAlertmanager, Token: "s3cret", Routes: []webhook.Route{
			{Match: map[string]string{"team": "/d[b]|storage/", "severity": "critical"}, To: db},
			{Match: map[string]string{"team": "db"}, To: web},
		}},
	})
	if got := rg.post(t, "routed", notification("firing", 1, nil), bearer); got != 200 {
		t.Fatalf("status %d", got)
	}
	if w := rg.sub.got(); len(w) != 1 || w[0].To != db {
		t.Fatalf("routed to %+v, want %+v", w, db)
	}
	other := bytes.Replace(notification("firing", 1, nil), []byte(`"team":"db"`), []byte(`"team":"web"`), 1)
	if got := rg.post(t, "routed", other, bearer); got != http.StatusUnprocessableEntity || rg.count("routed", "unrouted") != 1 {
		t.Fatalf("unrouted: status %d, counted %v", got, rg.count("routed", "unrouted"))
	}
}

func TestNotQueuedIsAnswered503AndTheRetryPosts(t *testing.T) {
	t.Parallel()
	rg := newRig(t, alertmanagerHook())
	rg.sub.fail = errors.New("redis is down")
	body := notification("firing", 1, nil)
	if got := rg.post(t, "am", body, bearer); got != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 so that Alertmanager retries", got)
	}
	rg.sub.mu.Lock()
	rg.sub.fail = nil
	rg.sub.mu.Unlock()
	if got := rg.post(t, "am", body, bearer); got != 200 {
		t.Fatalf("retry: %d", got)
	}
	if n := len(rg.sub.got()); n != 1 {
		t.Fatalf("%d works after the retry, want 1 (the failed claim was released)", n)
	}
}

func TestGrafanaAndJSONPayloads(t *testing.T) {
	t.Parallel()
	rg := newRig(t, webhook.Webhooks{
		"grafana": {Kind: webhook.KindGrafana, Token: "s3cret", To: ops},
		"deploys": {Kind: webhook.KindJSON, Token: "s3cret", To: ops, Text: "Deploy of {{.service}} by {{.user}}: {{.status}}"},
	})
	grafana := []byte(`{"receiver":"parley","status":"firing","orgId":1,"version":"1","groupKey":"{}/{}:{alertname=\"HighLatency\"}",
		"title":"[FIRING:1] HighLatency","commonLabels":{"alertname":"HighLatency"},
		"alerts":[{"status":"firing","labels":{"alertname":"HighLatency","grafana_folder":"api"},"annotations":{"summary":"p99 over 2s"},
		"startsAt":"2026-12-01T10:00:00Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"abc","dashboardURL":"https://grafana.example/d/x","panelURL":"https://grafana.example/d/x?viewPanel=2"}]}`)
	if got := rg.post(t, "grafana", grafana, bearer); got != 200 {
		t.Fatalf("grafana: %d", got)
	}
	if got := rg.post(t, "deploys", []byte(`{"service":"api","user":"<!here> ana","status":"ok"}`), bearer); got != 200 {
		t.Fatalf("json: %d", got)
	}
	if got := rg.post(t, "deploys", []byte(`[1,`), bearer); got != http.StatusBadRequest {
		t.Fatalf("bad json: %d", got)
	}
	w := rg.sub.got()
	if len(w) != 2 {
		t.Fatalf("%d works", len(w))
	}
	if !strings.Contains(w[0].Text, "p99 over 2s") || !strings.Contains(w[0].Text, "[dashboard](https://grafana.example/d/x)") || w[0].Group == "" {
		t.Fatalf("grafana work %+v", w[0])
	}
	if w[1].Text != "Deploy of api by ‹!here› ana: ok" || w[1].Group != "" {
		t.Fatalf("json work %q", w[1].Text)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]*webhook.Webhook{
		"no auth":         {Kind: webhook.KindAlertmanager, To: ops},
		"unknown kind":    {Kind: "nagios", Token: "x", To: ops},
		"json no text":    {Kind: webhook.KindJSON, Token: "x", To: ops},
		"no destination":  {Kind: webhook.KindAlertmanager, Token: "x"},
		"bad regex route": {Kind: webhook.KindAlertmanager, Token: "x", To: ops, Routes: []webhook.Route{{Match: map[string]string{"a": "/(/"}, To: ops}}},
		"bad answer":      {Kind: webhook.KindAlertmanager, Token: "x", To: ops, Answer: "shout"},
	} {
		if err := (webhook.Webhooks{"w": w}).Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (webhook.Webhooks{"Bad Name": {Kind: webhook.KindAlertmanager, Token: "x", To: ops}}).Validate(); err == nil {
		t.Error("a bad name was accepted")
	}
}
