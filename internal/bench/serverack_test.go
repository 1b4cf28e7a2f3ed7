package bench

import (
	"fmt"
	"math"
	"testing"
)

const exposition = `# HELP parley_webhook_duration_seconds Time this replica took.
# TYPE parley_webhook_duration_seconds histogram
parley_webhook_duration_seconds_bucket{route="POST /feishu/events",le="0.001"} 7
parley_webhook_duration_seconds_bucket{route="POST /feishu/events",le="+Inf"} 7
parley_webhook_duration_seconds_sum{route="POST /feishu/events"} 0.004
parley_webhook_duration_seconds_count{route="POST /feishu/events"} 7
parley_webhook_duration_seconds_bucket{route="POST /slack/events",le="0.001"} %d
parley_webhook_duration_seconds_bucket{route="POST /slack/events",le="0.002"} %d
parley_webhook_duration_seconds_bucket{route="POST /slack/events",le="0.004"} %d
parley_webhook_duration_seconds_bucket{route="POST /slack/events",le="+Inf"} %d
parley_webhook_duration_seconds_sum{route="POST /slack/events"} %g
parley_webhook_duration_seconds_count{route="POST /slack/events"} %[4]d
`

func expo(le1, le2, le4, inf int, sum float64) string {
	return fmt.Sprintf(exposition, le1, le2, le4, inf, sum)
}

// TestWebhookHistogram reads the Slack route's series out of an exposition
// that also holds another route's, and takes the figures of what was
// observed between two scrapes.
func TestWebhookHistogram(t *testing.T) {
	t.Parallel()
	before, err := ParseHistogram(expo(1, 1, 1, 1, 0.0005), webhookMetric, webhookRoute)
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseHistogram(expo(51, 91, 100, 101, 0.2005), webhookMetric, webhookRoute)
	if err != nil {
		t.Fatal(err)
	}
	run := after.Since(before) // 100 webhooks: 50 ≤ 1 ms, 40 more ≤ 2 ms, 9 more ≤ 4 ms, 1 above
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"count", run.Count(), 100},
		{"p50", run.Quantile(0.5), 0.001},
		{"p90", run.Quantile(0.9), 0.002},
		{"p99", run.Quantile(0.99), 0.004},
		{"p100", run.Quantile(1), math.Inf(1)},
		{"within 2 ms", run.ShareWithin(0.002), 0.9},
		{"mean", run.Mean(), 0.002},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 && !(math.IsInf(tc.got, 1) && math.IsInf(tc.want, 1)) {
			t.Errorf("%s = %g, want %g", tc.name, tc.got, tc.want)
		}
	}
	if _, err := ParseHistogram(expo(1, 1, 1, 1, 0), webhookMetric, `route="POST /slack/commands"`); err == nil {
		t.Error("a route with no series parsed")
	}
	if got := (Histogram{}).Mean(); !math.IsNaN(got) {
		t.Errorf("mean of nothing = %g, want NaN", got)
	}
}
