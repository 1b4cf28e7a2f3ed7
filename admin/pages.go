package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/sessions"
)

// notices are the outcomes a change redirects with (?done=CODE&t=TARGET);
// only these texts can appear, so a crafted link cannot put words on a
// page.
var notices = map[string]string{
	"on":        "Skill %s is now enabled (from the next message on, on every replica).",
	"off":       "Skill %s is now disabled (from the next message on, on every replica).",
	"trust":     "Skill %s is trusted as it is now; any change to its SKILL.md makes it untrusted again.",
	"notrust":   "Skill %s is not a workspace skill; only workspace skills need trust.",
	"reload":    "Skills reloaded: %s skills, in use from the next message on.",
	"reset":     "Conversation %s was cleared.",
	"compacted": "Conversation %s was compacted: its older part is now a summary.",
	"nothing":   "Conversation %s is short enough; there was nothing to compact.",
	"busy":      "Conversation %s is answering a message right now; try again in a moment.",
	"unknown":   "There is no skill named %s.",
	"failed":    "That did not work (%s); the log says why.",
}

func notice(r *http.Request) string {
	f, ok := notices[r.URL.Query().Get("done")]
	if !ok {
		return ""
	}
	return fmt.Sprintf(f, r.URL.Query().Get("t"))
}

func doneURL(page, code, target string, extra ...string) string {
	q := url.Values{"done": {code}, "t": {target}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return page + "?" + q.Encode()
}

// ---- overview

type overviewData struct {
	Replicas    []replicaView
	ReplicaErr  string
	Accounts    []accountView
	Redis       redisView
	Inventory   sessions.Inventory
	InvErr      string
	ModelErrors int64
	SkillCount  int
	Disabled    []string
	Grafana     string
	Audit       []audit.Entry
}

type replicaView struct {
	ReplicaInfo
	This bool
	Up   string // how long it has run
	Age  string // since its last beat
}

type redisView struct {
	OK      bool
	Latency string
	Version string
	Memory  string
	Err     string
}

func (s *Server) overview(r *http.Request, id identity, v *view) (string, error) {
	ctx := r.Context()
	v.Title, v.Nav = "Overview", "overview"
	d := &overviewData{Grafana: s.cfg.Admin.GrafanaURL}
	now := s.now()
	reps, err := ListReplicas(ctx, s.cfg.Redis, s.cfg.Prefix)
	if err != nil {
		d.ReplicaErr = "cannot read the replicas from Redis"
		s.log.Warn("admin: overview", "err", err)
	}
	for _, rep := range reps {
		d.ModelErrors += rep.ModelErrors
		d.Replicas = append(d.Replicas, replicaView{ReplicaInfo: rep, This: rep.ID == s.cfg.Replica,
			Up: roundDuration(now.Sub(rep.Started)), Age: roundDuration(now.Sub(rep.Seen))})
	}
	if s.cfg.Accounts != nil {
		d.Accounts = accountViews(s.cfg.Accounts.AccountStates(), reps, s.cfg.Replica)
	}
	d.Redis = s.redisState(ctx)
	if inv, err := s.cfg.Store.Inventory(ctx, 0); err != nil {
		d.InvErr = "cannot read the queues from Redis"
		s.log.Warn("admin: overview", "err", err)
	} else {
		inv.Conversations = nil
		d.Inventory = inv
	}
	c := s.cfg.Skills.Registry.Catalog()
	d.SkillCount = c.Len()
	disabled, err := s.cfg.Skills.State.Disabled(ctx)
	if err != nil {
		return "", err
	}
	for _, sk := range c.All() {
		if disabled[sk.Name] {
			d.Disabled = append(d.Disabled, sk.Name)
		}
	}
	if d.Audit, err = s.ledger.Query(ctx, audit.Filter{Kind: audit.KindAdmin, Since: s.ledger.Retention(), Limit: 10}); err != nil {
		s.log.Warn("admin: overview", "err", err)
	}
	v.Data = d
	return "overview", nil
}

func (s *Server) redisState(ctx context.Context) redisView {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.cfg.Redis.Ping(ctx).Err(); err != nil {
		s.log.Warn("admin: redis ping", "err", err)
		return redisView{Err: "does not answer"}
	}
	rv := redisView{OK: true, Latency: time.Since(start).Round(10 * time.Microsecond).String()}
	if info, err := s.cfg.Redis.Info(ctx, "server", "memory").Result(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			k, val, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch k {
			case "redis_version":
				rv.Version = val
			case "used_memory_human":
				rv.Memory = val
			}
		}
	}
	return rv
}

func roundDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	case d < 48*time.Hour:
		return d.Round(time.Hour).String()
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
