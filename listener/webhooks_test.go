package listener

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/metrics"
)

// TestTimeWebhooksObservesRoutedPosts: a POST that the mux routes is timed
// under its route; probes, unrouted POSTs and refused methods are not.
func TestTimeWebhooksObservesRoutedPosts(t *testing.T) {
	m := metrics.New()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /feishu/events", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	h := TimeWebhooks(mux, m)
	for _, req := range []struct{ method, path string }{
		{"POST", "/slack/events"}, {"POST", "/slack/events"}, {"POST", "/feishu/events"},
		{"GET", "/healthz"}, {"POST", "/nowhere"}, {"GET", "/slack/events"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(req.method, req.path, strings.NewReader("{}")))
	}
	counts := map[string]int{}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "parley_webhook_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "route" {
					counts[l.GetValue()] = int(s.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	if len(counts) != 2 || counts["POST /slack/events"] != 2 || counts["POST /feishu/events"] != 1 {
		t.Fatalf("observed %v; want 2 of POST /slack/events and 1 of POST /feishu/events, nothing else", counts)
	}
	if n := testutil.CollectAndCount(m.WebhookDuration); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
}
