package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/admin"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/redis/go-redis/v9"
)

func TestHeartbeatsListTheLiveReplicas(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	m := metrics.New()
	start := func(id string, every time.Duration) context.CancelFunc {
		bctx, cancel := context.WithCancel(ctx)
		ready := make(chan struct{})
		done := make(chan struct{})
		hb := &admin.Heartbeat{Client: r.Client, Prefix: r.Prefix, Every: every, Gatherer: m.Registry,
			Info: func() admin.ReplicaInfo { return admin.ReplicaInfo{ID: id, Host: id + ".local", Version: "v1"} }}
		go func() { defer close(done); hb.Run(bctx, ready) }()
		<-ready
		return func() { cancel(); <-done }
	}
	ids := func() []string {
		reps, err := admin.ListReplicas(ctx, r.Client, r.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rep := range reps {
			out = append(out, rep.ID)
		}
		return out
	}
	stopA := start("a", time.Second)
	stopB := start("b", time.Second)
	if got := ids(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("replicas %v, want [a b]", got)
	}
	// A replica that stops cleanly leaves the list at once.
	stopB()
	if got := ids(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after b stopped: %v, want [a]", got)
	}
	stopA()
	// One that dies (its key is not removed) leaves it when its key
	// expires.
	startDead := func(id string) {
		// What a killed replica leaves: its last beat, with its TTL.
		if err := r.Client.Set(ctx, r.Prefix+"admin:replica:"+id, `{"id":"`+id+`"}`, 300*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.Client.ZAdd(ctx, r.Prefix+"admin:replicas", redisZ(id)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	startDead("dead")
	if got := ids(); len(got) != 1 || got[0] != "dead" {
		t.Fatalf("a dead replica before its key expired: %v", got)
	}
	poll(t, "the dead replica's key to expire", func() bool { return len(ids()) == 0 })
}

func TestHeartbeatCountsModelErrorsAndSkillLoads(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := metrics.New()
	hb := &admin.Heartbeat{Client: r.Client, Prefix: r.Prefix, Every: 50 * time.Millisecond, Gatherer: m.Registry,
		Info: func() admin.ReplicaInfo { return admin.ReplicaInfo{ID: "a"} }}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); hb.Run(ctx, ready) }()
	<-ready
	m.LLMRequests.WithLabelValues("default", metrics.OutcomeError).Add(3)
	m.LLMRequests.WithLabelValues("backup", metrics.OutcomeError).Add(2)
	m.LLMRequests.WithLabelValues("default", metrics.OutcomeOK).Add(10)
	m.SkillLoads.WithLabelValues("slack", "release-notes", metrics.SkillInjected).Add(2)
	m.SkillLoads.WithLabelValues("wechat", "release-notes", metrics.SkillInjected).Inc()
	m.SkillLoads.WithLabelValues("slack", "release-notes", metrics.SkillNotFound).Add(5)
	m.SkillInvocations.WithLabelValues("slack", "deploy-check").Inc()
	poll(t, "the counts in the heartbeat", func() bool {
		reps, _ := admin.ListReplicas(ctx, r.Client, r.Prefix)
		return len(reps) == 1 && reps[0].ModelErrors == 5 && reps[0].SkillLoads["release-notes"] == 3 && reps[0].SkillLoads["deploy-check"] == 1
	})
	cancel()
	<-done
}

func redisZ(id string) redis.Z {
	return redis.Z{Score: float64(time.Now().UnixMilli()), Member: id}
}
