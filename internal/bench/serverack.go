package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// webhookSeries is parley's own time to answer the bench's webhooks:
// parley_webhook_duration_seconds of the Slack events route. Against the
// bench's ack figure, which also holds the bench's own sending and
// reading, it says how much of an ack parley spent.
const (
	webhookMetric = "parley_webhook_duration_seconds"
	webhookRoute  = `route="POST /slack/events"`
)

// Histogram is one series of a Prometheus histogram: the cumulative count
// at or below each bucket's upper bound (ascending, +Inf last), and the sum.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Sum    float64
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

// ParseHistogram reads the series of the histogram name whose labels hold
// match from a Prometheus text exposition.
func ParseHistogram(text, name, match string) (Histogram, error) {
	var h Histogram
	sum := false
	for _, line := range strings.Split(text, "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, name+"_bucket{"):
			m := leLabel.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			le, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return h, fmt.Errorf("%s: bucket bound %q: %w", name, m[1], err)
			}
			h.Bounds = append(h.Bounds, le)
			h.Counts = append(h.Counts, v)
		case strings.HasPrefix(line, name+"_sum{"):
			h.Sum, sum = v, true
		}
	}
	if len(h.Bounds) == 0 || !sum || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		return Histogram{}, fmt.Errorf("no series %s{%s} with its buckets and sum", name, match)
	}
	return h, nil
}

// Since is what was observed between before and h (same buckets).
func (h Histogram) Since(before Histogram) Histogram {
	if len(before.Counts) != len(h.Counts) {
		return h
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Sum: h.Sum - before.Sum}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - before.Counts[i]
	}
	return d
}

// Count is the number of observations.
func (h Histogram) Count() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Quantile is the upper bound of the first bucket that holds q (0–1) of
// the observations: the q-quantile is at most this (NaN with none).
func (h Histogram) Quantile(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return math.NaN()
	}
	for i, c := range h.Counts {
		if c >= q*n {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// ShareWithin is the share (0–1) of the observations at or below bound,
// which must be one of the buckets' bounds (NaN with none, or no such bucket).
func (h Histogram) ShareWithin(bound float64) float64 {
	n := h.Count()
	for i, b := range h.Bounds {
		if b == bound && n > 0 {
			return h.Counts[i] / n
		}
	}
	return math.NaN()
}

// Mean is the mean observation (NaN with none).
func (h Histogram) Mean() float64 {
	if h.Count() == 0 {
		return math.NaN()
	}
	return h.Sum / h.Count()
}

// webhookTimes scrapes parley's /metrics for its webhook histogram.
func webhookTimes(ctx context.Context, base string) (Histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return Histogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Histogram{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Histogram{}, err
	}
	return ParseHistogram(string(b), webhookMetric, webhookRoute)
}
