package usage

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// clock is a settable time for a Store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// spend records a day of traffic: alice and bob on Slack (alice in two
// channels), carol on Feishu, one turn a day ago and one beyond a week.
func spend(t *testing.T, s *Store, c *clock) {
	t.Helper()
	ctx := context.Background()
	start := c.t
	for _, r := range []struct {
		ago  time.Duration
		turn Turn
	}{
		{8 * 24 * time.Hour, Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U-old", Model: "default", Prompt: 5000, Completion: 5000}},
		{30 * time.Hour, Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U-alice", Model: "default", Prompt: 700, Completion: 70}},
		{3 * time.Hour, Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U-alice", Model: "default", Prompt: 1000, Completion: 100, Cached: 800}},
		{2 * time.Hour, Turn{Channel: "slack", Workspace: "T1", Chat: "C2", User: "U-alice", Model: "default", Prompt: 500, Completion: 50}},
		{1 * time.Hour, Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U-bob", Model: "default", Prompt: 200, Completion: 20, Cached: 100}},
		{10 * time.Minute, Turn{Channel: "feishu", Workspace: "tenant1", Chat: "oc_vip", User: "ou_carol", Model: "backup", Prompt: 3000, Completion: 300}},
		// A turn the model never answered spends nothing and is not a turn.
		{5 * time.Minute, Turn{Channel: "feishu", Workspace: "tenant1", Chat: "oc_vip", User: "ou_carol", Model: "backup"}},
	} {
		c.t = start.Add(-r.ago)
		if err := s.Record(ctx, r.turn); err != nil {
			t.Fatal(err)
		}
	}
	c.t = start
}

func checkReports(t *testing.T, client redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 18, 30, 0, 0, time.UTC)}
	s := New(client, prefix)
	s.now = c.now
	spend(t, s, c)

	users, err := s.Read(ctx, 24*time.Hour, ByUser)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Channel: "feishu", Workspace: "tenant1", User: "ou_carol", Turns: 1, Prompt: 3000, Completion: 300},
		{Channel: "slack", Workspace: "T1", User: "U-alice", Turns: 2, Prompt: 1500, Completion: 150, Cached: 800},
		{Channel: "slack", Workspace: "T1", User: "U-bob", Turns: 1, Prompt: 200, Completion: 20, Cached: 100},
	}
	if !equalRows(users.Rows, want) {
		t.Errorf("by user over 24h:\n got %+v\nwant %+v", users.Rows, want)
	}
	if users.Total != (Row{Turns: 4, Prompt: 4700, Completion: 470, Cached: 900}) {
		t.Errorf("total = %+v", users.Total)
	}
	if !users.From.Equal(time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("window starts %v, want the hour 24h ago falls in", users.From)
	}

	chats, _ := s.Read(ctx, 24*time.Hour, ByChat)
	want = []Row{
		{Channel: "feishu", Workspace: "tenant1", Chat: "oc_vip", Turns: 1, Prompt: 3000, Completion: 300},
		{Channel: "slack", Workspace: "T1", Chat: "C1", Turns: 2, Prompt: 1200, Completion: 120, Cached: 900},
		{Channel: "slack", Workspace: "T1", Chat: "C2", Turns: 1, Prompt: 500, Completion: 50},
	}
	if !equalRows(chats.Rows, want) {
		t.Errorf("by chat:\n got %+v\nwant %+v", chats.Rows, want)
	}
	channels, _ := s.Read(ctx, 48*time.Hour, ByChannel)
	want = []Row{
		{Channel: "feishu", Turns: 1, Prompt: 3000, Completion: 300},
		{Channel: "slack", Turns: 4, Prompt: 2400, Completion: 240, Cached: 900},
	}
	if !equalRows(channels.Rows, want) {
		t.Errorf("by channel over 48h (alice's turn of 30h ago included):\n got %+v\nwant %+v", channels.Rows, want)
	}
	models, _ := s.Read(ctx, 14*24*time.Hour, ByModel)
	want = []Row{
		{Model: "default", Turns: 5, Prompt: 7400, Completion: 5240, Cached: 900},
		{Model: "backup", Turns: 1, Prompt: 3000, Completion: 300},
	}
	if !equalRows(models.Rows, want) {
		t.Errorf("by model over 14 days:\n got %+v\nwant %+v", models.Rows, want)
	}
	recent, _ := s.Read(ctx, 90*time.Minute, ByUser)
	if len(recent.Rows) != 2 || recent.Rows[0].User != "ou_carol" || recent.Rows[1].User != "U-bob" {
		t.Errorf("the last 90 minutes (rounded to 17:00) = %+v, want carol and bob", recent.Rows)
	}
	// Every hash expires: retention is bounded.
	ttl, err := client.TTL(ctx, s.key(c.t)).Result()
	if err != nil || ttl <= 0 || ttl > Retention+time.Hour {
		t.Errorf("TTL of the current hour = %v %v, want at most the retention", ttl, err)
	}
	for _, bad := range []struct {
		since time.Duration
		by    string
	}{{0, ByUser}, {-time.Hour, ByUser}, {Retention + time.Hour, ByUser}, {time.Hour, "workspace"}} {
		if _, err := s.Read(ctx, bad.since, bad.by); err == nil {
			t.Errorf("Read(%v, %q) succeeded", bad.since, bad.by)
		}
	}
}

func equalRows(got, want []Row) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestUsageReports(t *testing.T) {
	r := redistest.New(t)
	checkReports(t, r.Client, r.Prefix)
}

// A turn is one key's transaction and a report one read per key, so both
// run on Redis Cluster.
func TestUsageOnACluster(t *testing.T) {
	c := redistest.NewCluster(t)
	checkReports(t, c.Client, c.Prefix)
}

// The embedded store (no REDIS_URL) keeps usage as well.
func TestUsageOnTheEmbeddedStore(t *testing.T) {
	srv := miniredis.RunT(t)
	checkReports(t, redis.NewClient(&redis.Options{Addr: srv.Addr()}), "parley:")
}

// Platform ids are data: an id made to look like a field's separator, or
// another group's, stays its own row.
func TestUsageIdsCannotForgeRows(t *testing.T) {
	r := redistest.New(t)
	s := New(r.Client, r.Prefix)
	now := time.Now()
	s.now = func() time.Time { return now } // one hour's hash, read below
	ctx := context.Background()
	for _, u := range []string{`U1","prompt`, `U1"]`, "U1\x00", "U1"} {
		if err := s.Record(ctx, Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: u, Model: "default", Prompt: 10, Completion: 1}); err != nil {
			t.Fatal(err)
		}
	}
	fields, err := r.Client.HKeys(ctx, s.key(now)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{`U1","prompt`, `U1"]`, "U1\x00", "U1"} {
		if want := field(byTurn, "slack", "T1", "C1", u, "default", kindPrompt); !slices.Contains(fields, want) {
			t.Errorf("no field %s among %q", want, fields)
		}
	}
	rep, err := s.Read(ctx, time.Hour, ByUser)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("rows = %+v, want one per user id", rep.Rows)
	}
	for _, row := range rep.Rows {
		if row.Prompt != 10 || row.Turns != 1 {
			t.Errorf("row %+v, want 10 prompt tokens in one turn", row)
		}
	}
}

// TestATurnIsOneFieldPerKind: a turn writes a field for each kind it
// counts, not one per grouping: three for a turn without cached tokens,
// four with them.
func TestATurnIsOneFieldPerKind(t *testing.T) {
	r := redistest.New(t)
	s := New(r.Client, r.Prefix)
	now := time.Now()
	s.now = func() time.Time { return now }
	ctx := context.Background()
	for i, c := range []struct {
		turn   Turn
		fields int64
	}{
		{Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U1", Model: "default", Prompt: 10, Completion: 1}, 3},
		{Turn{Channel: "slack", Workspace: "T1", Chat: "C2", User: "U1", Model: "default", Prompt: 10, Completion: 1, Cached: 8}, 4},
	} {
		before, _ := r.Client.HLen(ctx, s.key(now)).Result()
		if err := s.Record(ctx, c.turn); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Client.HLen(ctx, s.key(now)).Result(); err != nil || n-before != c.fields {
			t.Errorf("turn %d: %d fields, %v; want %d", i, n-before, err, c.fields)
		}
	}
}

// TestUsageReadsTheEarlierFieldsToo: an hour recorded partly by an
// earlier version (a field per grouping) and partly by this one (a field
// per turn's user, chat and model) is reported whole, each turn once.
func TestUsageReadsTheEarlierFieldsToo(t *testing.T) {
	r := redistest.New(t)
	s := New(r.Client, r.Prefix)
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	ctx := context.Background()
	// The earlier version's record of alice's turn in C1 (700 + 70 tokens).
	earlier := map[string]any{}
	for _, g := range [][]string{{ByUser, "slack", "T1", "U-alice"}, {ByChat, "slack", "T1", "C1"}, {ByChannel, "slack"}, {ByModel, "default"}} {
		for kind, n := range map[string]int{kindPrompt: 700, kindCompletion: 70, kindTurns: 1} {
			earlier[field(append(slices.Clone(g), kind)...)] = n
		}
	}
	if err := r.Client.HSet(ctx, s.key(now), earlier).Err(); err != nil {
		t.Fatal(err)
	}
	// This version's: alice again in C1, bob in C2 with the backup model.
	for _, turn := range []Turn{
		{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U-alice", Model: "default", Prompt: 300, Completion: 30},
		{Channel: "slack", Workspace: "T1", Chat: "C2", User: "U-bob", Model: "backup", Prompt: 100, Completion: 10, Cached: 50},
	} {
		if err := s.Record(ctx, turn); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]Row{
		ByUser: {{Channel: "slack", Workspace: "T1", User: "U-alice", Turns: 2, Prompt: 1000, Completion: 100},
			{Channel: "slack", Workspace: "T1", User: "U-bob", Turns: 1, Prompt: 100, Completion: 10, Cached: 50}},
		ByChat: {{Channel: "slack", Workspace: "T1", Chat: "C1", Turns: 2, Prompt: 1000, Completion: 100},
			{Channel: "slack", Workspace: "T1", Chat: "C2", Turns: 1, Prompt: 100, Completion: 10, Cached: 50}},
		ByChannel: {{Channel: "slack", Turns: 3, Prompt: 1100, Completion: 110, Cached: 50}},
		ByModel: {{Model: "default", Turns: 2, Prompt: 1000, Completion: 100},
			{Model: "backup", Turns: 1, Prompt: 100, Completion: 10, Cached: 50}},
	}
	for _, by := range Bys {
		rep, err := s.Read(ctx, time.Hour, by)
		if err != nil {
			t.Fatal(err)
		}
		if !equalRows(rep.Rows, want[by]) {
			t.Errorf("by %s:\n got %+v\nwant %+v", by, rep.Rows, want[by])
		}
		if rep.Total != (Row{Turns: 3, Prompt: 1100, Completion: 110, Cached: 50}) {
			t.Errorf("by %s: total %+v; want the three turns", by, rep.Total)
		}
	}
}

// BenchmarkRecord is one turn's recording on a real Redis: the CPU and
// allocations a turn pays for the usage report.
func BenchmarkRecord(b *testing.B) {
	r := redistest.New(b)
	s := New(r.Client, r.Prefix)
	ctx := context.Background()
	t := Turn{Channel: "slack", Workspace: "T1", Chat: "C1", User: "U1", Model: "default", Prompt: 1200, Completion: 80, Cached: 1000}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Record(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFieldIsWhatJSONWrites: a field is byte for byte json.Marshal's
// array, whether its parts are plain or need escaping; reports find rows
// by it.
func TestFieldIsWhatJSONWrites(t *testing.T) {
	tests := [][]string{
		{ByUser, "slack", "T0123", "U0456"},
		{ByModel, "gpt-4o-mini"},
		{ByChat, "feishu", "", "oc_9f8e"},
		{ByUser, "wechat", "wx \"quoted\"", `back\slash`},
		{ByUser, "console", "<html> & co", "tab\there"},
		{ByUser, "slack", "T1", "Zoë 名前"},
		{ByUser, "slack", "T1", "line\u2028sep"},
		{ByUser, "slack", "T1", "bad \xff utf-8"},
		{ByChannel, "\x7f"},
		{},
	}
	for _, parts := range tests {
		want, err := json.Marshal(parts)
		if err != nil {
			t.Fatal(err)
		}
		if got := field(parts...); got != string(want) {
			t.Errorf("field(%q) = %s; json.Marshal writes %s", parts, got, want)
		}
	}
}
