package listener

import (
	"net/http"
	"time"

	"github.com/parleyhq/parley/metrics"
)

// TimeWebhooks observes how long each POST that mux routes takes, by its
// route pattern ("POST /slack/events"): how long a platform waits for its
// answer, without the network or the platform's side in it. Probes and
// /metrics are GETs and are not timed; an unrouted POST has no pattern and
// is not timed either, so the routes bound the label's values.
func TimeWebhooks(mux *http.ServeMux, m *metrics.Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			mux.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		mux.ServeHTTP(w, r)
		// ServeMux records the route it chose on r.
		if r.Pattern != "" {
			m.WebhookDuration.WithLabelValues(r.Pattern).Observe(time.Since(start).Seconds())
		}
	})
}
