package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
)

// Every replica heartbeats into Redis: a key of its own with a TTL
// (PREFIX admin:replica:ID) holding what it knows of itself, and its ID in
// a sorted set (PREFIX admin:replicas) scored by the time of the beat, so
// that a reader finds the live replicas without scanning the keyspace. A
// replica that dies stops beating and drops off the overview when its key
// expires; one that stops cleanly removes itself at once.

// ChannelHealth is one channel adapter's state as its replica sees it.
type ChannelHealth struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
	// Account is the app of the platform the adapter serves ("default"
	// or empty for the section's own).
	Account string `json:"account,omitempty"`
}

// ReplicaInfo is what one replica reports in its heartbeat.
type ReplicaInfo struct {
	ID       string          `json:"id"`
	Host     string          `json:"host"`
	Version  string          `json:"version"`
	Started  time.Time       `json:"started"`
	Seen     time.Time       `json:"seen"`
	Channels []ChannelHealth `json:"channels"`
	// MCPDown names the MCP servers this replica is not connected to.
	MCPDown []string `json:"mcp_down,omitempty"`
	// ModelErrors is this replica's count of failed model requests over
	// the last hour (since its start when younger).
	ModelErrors int64 `json:"model_errors_1h"`
	// SkillLoads counts, per skill, the bodies this replica injected over
	// the last 24 hours (since its start when younger).
	SkillLoads map[string]int64 `json:"skill_loads_24h,omitempty"`
	// Console is the admin console's address on this replica; empty when
	// it is off there.
	Console string `json:"console,omitempty"`
}

// DefaultHeartbeatEvery is how often a replica beats; its key lives three
// beats, so one late beat does not make it vanish.
const DefaultHeartbeatEvery = 5 * time.Second

func replicaKey(prefix, id string) string { return prefix + "admin:replica:" + id }
func replicaIndex(prefix string) string   { return prefix + "admin:replicas" }

// Heartbeat publishes this replica's ReplicaInfo until its context ends.
type Heartbeat struct {
	Client redis.UniversalClient
	Prefix string
	// Every is the beat interval (0: DefaultHeartbeatEvery).
	Every time.Duration
	// Info describes the replica at each beat; Seen, ModelErrors and
	// SkillLoads are filled in by the heartbeat.
	Info func() ReplicaInfo
	// Gatherer is the replica's metrics registry, read at each beat for
	// the model errors and skill loads; nil reports none.
	Gatherer prometheus.Gatherer
	Log      *slog.Logger

	mu      sync.Mutex
	samples []sample // oldest first, one every sampleEvery, 24 h kept
}

// sample is the cumulative counters read at one moment.
type sample struct {
	at          time.Time
	modelErrors float64
	skillLoads  map[string]float64
}

const (
	sampleEvery   = time.Minute
	modelErrorsOf = time.Hour
	skillLoadsOf  = 24 * time.Hour
)

// Run beats until ctx ends, then removes the replica's key. The first beat
// is written before Run returns to its loop, so a caller that waits for
// ready knows the replica is listed.
func (h *Heartbeat) Run(ctx context.Context, ready chan<- struct{}) {
	every := h.Every
	if every <= 0 {
		every = DefaultHeartbeatEvery
	}
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id := ""
	failing := false
	beat := func() {
		info, err := h.beat(ctx, every, time.Now())
		id = info.ID
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("admin: heartbeat not written; this replica may be missing from the console", "err", err)
			failing = true
		case err == nil && failing:
			log.Info("admin: heartbeat written again")
			failing = false
		}
	}
	beat()
	if ready != nil {
		close(ready)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if id != "" {
				stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				pipe := h.Client.Pipeline()
				pipe.Del(stop, replicaKey(h.Prefix, id))
				pipe.ZRem(stop, replicaIndex(h.Prefix), id)
				_, _ = pipe.Exec(stop)
				cancel()
			}
			return
		case <-t.C:
			beat()
		}
	}
}

// beat writes one heartbeat.
func (h *Heartbeat) beat(ctx context.Context, every time.Duration, now time.Time) (ReplicaInfo, error) {
	info := h.Info()
	info.Seen = now.UTC().Truncate(time.Millisecond)
	info.ModelErrors, info.SkillLoads = h.windows(now)
	data, err := json.Marshal(info)
	if err != nil {
		return info, fmt.Errorf("admin: encode heartbeat: %w", err)
	}
	ttl := 3 * every
	pipe := h.Client.Pipeline()
	pipe.Set(ctx, replicaKey(h.Prefix, info.ID), data, ttl)
	pipe.ZAdd(ctx, replicaIndex(h.Prefix), redis.Z{Score: float64(now.UnixMilli()), Member: info.ID})
	// Replicas that died long ago leave the index too.
	pipe.ZRemRangeByScore(ctx, replicaIndex(h.Prefix), "-inf", strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return info, fmt.Errorf("admin: heartbeat: %w", err)
	}
	return info, nil
}

// windows reads the counters now and returns their increase over the
// last hour (model errors) and 24 hours (skill loads).
func (h *Heartbeat) windows(now time.Time) (int64, map[string]int64) {
	if h.Gatherer == nil {
		return 0, nil
	}
	cur := readCounters(h.Gatherer)
	cur.at = now
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.samples); n == 0 || now.Sub(h.samples[n-1].at) >= sampleEvery {
		// The first sample is a zero at start: counters start at zero
		// with the process, so everything counted since is in a window.
		if n == 0 {
			h.samples = append(h.samples, sample{at: now, skillLoads: map[string]float64{}})
		} else {
			h.samples = append(h.samples, cur)
		}
	}
	cut := 0
	for cut < len(h.samples)-1 && now.Sub(h.samples[cut+1].at) >= skillLoadsOf {
		cut++
	}
	h.samples = h.samples[cut:]
	base := func(span time.Duration) sample {
		for _, s := range h.samples {
			if now.Sub(s.at) <= span {
				return s
			}
		}
		return h.samples[len(h.samples)-1]
	}
	errs := int64(cur.modelErrors - base(modelErrorsOf).modelErrors)
	old := base(skillLoadsOf).skillLoads
	loads := map[string]int64{}
	for name, v := range cur.skillLoads {
		if d := int64(v - old[name]); d > 0 {
			loads[name] = d
		}
	}
	return max(errs, 0), loads
}

// readCounters sums the counters the heartbeat reports.
func readCounters(g prometheus.Gatherer) sample {
	s := sample{skillLoads: map[string]float64{}}
	families, _ := g.Gather() // a partial result is still worth reporting
	for _, f := range families {
		switch f.GetName() {
		case "parley_llm_requests_total":
			for _, m := range f.GetMetric() {
				if label(m, "outcome") == "error" {
					s.modelErrors += m.GetCounter().GetValue()
				}
			}
		case "parley_skill_loads_total":
			for _, m := range f.GetMetric() {
				if label(m, "outcome") == "injected" {
					s.skillLoads[label(m, "skill")] += m.GetCounter().GetValue()
				}
			}
		case "parley_skill_invocations_total":
			// A manual /skill:NAME injects the body too.
			for _, m := range f.GetMetric() {
				s.skillLoads[label(m, "skill")] += m.GetCounter().GetValue()
			}
		}
	}
	return s
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// ListReplicas returns the replicas whose heartbeat is current, by ID.
func ListReplicas(ctx context.Context, client redis.UniversalClient, prefix string) ([]ReplicaInfo, error) {
	ids, err := client.ZRange(ctx, replicaIndex(prefix), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("admin: list replicas: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := client.Pipeline()
	gets := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		gets[i] = pipe.Get(ctx, replicaKey(prefix, id))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("admin: read replicas: %w", err)
	}
	var out []ReplicaInfo
	for _, g := range gets {
		data, err := g.Bytes()
		if err != nil {
			continue // expired: the replica stopped beating
		}
		var info ReplicaInfo
		if json.Unmarshal(data, &info) == nil && info.ID != "" {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b ReplicaInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
