package schedule_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/triggers"
	"github.com/parleyhq/parley/triggers/schedule"
)

// TestChatSchedulesAreBounded: a chat keeps at most max_per_chat
// schedules, none firing more often than min_interval, none that does not
// parse; another chat's ID is not removed from here; the file's schedules
// are listed read-only and refuse removal; the scheduler sees each kept
// one as an agent turn in its chat.
func TestChatSchedulesAreBounded(t *testing.T) {
	r := redistest.New(t)
	conf := schedule.DefaultConfig()
	conf.MaxPerChat = 2
	conf.Schedules = map[string]*schedule.Schedule{"digest": {Cron: "0 9 * * *", To: slackChat, Answer: triggers.AnswerPost, Text: "x"}}
	chats := schedule.NewChats(r.Client, r.Prefix, conf, newFakeClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
	ctx := context.Background()
	here := channels.Message{Channel: "slack", Workspace: "T0123", Chat: "C0456", Thread: "1.2", User: "U1"}
	there := channels.Message{Channel: "slack", Workspace: "T0123", Chat: "C0999", User: "U2"}

	refusals := []struct{ spec, prompt, want string }{
		{"* * * * *", "every minute", "at most every 15m0s"},
		{"*/5 * * * *", "every five", "at most every 15m0s"},
		{"@every 1m", "every minute", "at most every 15m0s"},
		{"61 * * * *", "bad minute", "can't be read"},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", "no such zone", "can't be read"},
		{"CRON_TZ=Europe/Berlin TZ=Asia/Tokyo 0 9 * * *", "two zones", "can't be read"},
		{"CRON_TZ=../../etc/passwd 0 9 * * *", "a path", "can't be read"},
		{"CRON_TZ=Europe/Berlin", "no fields", "can't be read"},
		{"0 9 * * *", "  ", "Say what to do"},
		{"0 9 * * *", strings.Repeat("x", 2001), "too long"},
	}
	for _, c := range refusals {
		id, refusal, err := chats.Add(ctx, here, c.spec, c.prompt)
		if err != nil || id != "" || !strings.Contains(refusal, c.want) {
			t.Errorf("Add(%q) = %q, %q, %v; want a refusal with %q", c.spec, id, refusal, err, c.want)
		}
	}
	var ids []string
	for _, spec := range []string{"0 9 * * 1-5", "@hourly"} {
		id, refusal, err := chats.Add(ctx, here, spec, "post the open incidents")
		if err != nil || refusal != "" || id == "" {
			t.Fatalf("Add(%q) = %q, %q, %v", spec, id, refusal, err)
		}
		ids = append(ids, id)
	}
	if _, refusal, _ := chats.Add(ctx, here, "@daily", "a third"); !strings.Contains(refusal, "has 2 schedules already") {
		t.Errorf("a third schedule: %q, want the bound", refusal)
	}
	if id, refusal, err := chats.Add(ctx, there, "@daily", "another chat's"); err != nil || refusal != "" || id == "" {
		t.Errorf("another chat's first schedule refused: %q %v", refusal, err)
	}
	list, err := chats.List(ctx, here)
	if err != nil || !strings.Contains(list, "`digest` `0 9 * * *` (UTC, post, from the configuration: read-only here)") ||
		!strings.Contains(list, ids[0]) || !strings.Contains(list, ids[1]) || strings.Contains(list, "another chat's") {
		t.Errorf("List = %q, %v", list, err)
	}
	if refusal, err := chats.Remove(ctx, there, ids[0]); err != nil || !strings.Contains(refusal, "has no schedule") {
		t.Errorf("removing this chat's schedule from another = %q, %v", refusal, err)
	}
	if refusal, _ := chats.Remove(ctx, here, "digest"); !strings.Contains(refusal, "in the configuration") {
		t.Errorf("removing a file schedule = %q", refusal)
	}
	entries, err := chats.Entries(ctx)
	if err != nil || len(entries) != 3 {
		t.Fatalf("Entries = %d, %v; want 3", len(entries), err)
	}
	for _, e := range entries {
		if e.Label != schedule.ChatLabel || e.Work.Answer != triggers.AnswerAgent || e.Work.To.Thread != "" || e.Work.To.Platform != "slack" {
			t.Errorf("entry %+v: want an agent turn in its chat, labelled chat", e)
		}
	}
	if refusal, err := chats.Remove(ctx, here, ids[0]); err != nil || refusal != "" {
		t.Errorf("Remove = %q, %v", refusal, err)
	}
	if entries, _ := chats.Entries(ctx); len(entries) != 2 {
		t.Errorf("after a remove, %d entries, want 2", len(entries))
	}
	if id, refusal, _ := chats.Add(ctx, here, "@daily", "room again"); id == "" {
		t.Errorf("after a remove the chat is still full: %q", refusal)
	}
}

// TestChatScheduleInItsZone: /schedule add "CRON_TZ=ZONE CRON" keeps a
// schedule read in that zone (09:00 in Berlin is 08:00 UTC in March, 07:00
// in July), and says so in the list.
func TestChatScheduleInItsZone(t *testing.T) {
	r := redistest.New(t)
	chats := schedule.NewChats(r.Client, r.Prefix, schedule.DefaultConfig(), newFakeClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
	ctx := context.Background()
	here := channels.Message{Channel: "slack", Workspace: "T0123", Chat: "C0456", User: "U1"}
	id, refusal, err := chats.Add(ctx, here, "CRON_TZ=Europe/Berlin 0 9 * * *", "the morning digest")
	if err != nil || refusal != "" {
		t.Fatalf("Add = %q, %q, %v", id, refusal, err)
	}
	entries, err := chats.Entries(ctx)
	if err != nil || len(entries) != 1 {
		t.Fatalf("Entries = %+v, %v", entries, err)
	}
	e := entries[0]
	for _, c := range []struct{ after, want time.Time }{
		{time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)},
		{time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 2, 7, 0, 0, 0, time.UTC)},
	} {
		if got := e.Schedule.Next(c.after); !got.Equal(c.want) {
			t.Errorf("next after %v = %v, want %v", c.after, got, c.want)
		}
	}
	if e.Spec != "CRON_TZ=Europe/Berlin 0 9 * * *" {
		t.Errorf("Spec = %q; want the zone shown with the fields", e.Spec)
	}
	list, _ := chats.List(ctx, here)
	if !strings.Contains(list, "`"+id+"` `0 9 * * *` (Europe/Berlin)") {
		t.Errorf("List = %q; want the zone", list)
	}
	if id, refusal, err := chats.Add(ctx, here, "TZ=Asia/Tokyo @daily", "robfig's other prefix"); id == "" || refusal != "" || err != nil {
		t.Errorf("Add with TZ= = %q, %q, %v", id, refusal, err)
	}
	if list, _ := chats.List(ctx, here); !strings.Contains(list, "`@daily` (Asia/Tokyo)") {
		t.Errorf("List = %q; want the TZ= zone", list)
	}
	if _, err := schedule.Parse("CRON_TZ=Europe/Berlin 0 9 * * *", ""); err == nil {
		t.Error("the file's cron: takes a zone prefix; it has timezone: for that")
	}
}

// TestConfigValidates: the problems of a schedule of the file are named by
// their keys.
func TestConfigValidates(t *testing.T) {
	cases := []struct {
		name string
		s    *schedule.Schedule
		want string
	}{
		{"ok", &schedule.Schedule{Cron: "@daily", Timezone: "Europe/Paris", To: slackChat, Answer: "post", Text: "x"}, ""},
		{"bad-cron", &schedule.Schedule{Cron: "0 25 * * *", To: slackChat, Answer: "post", Text: "x"}, "schedules.bad-cron.cron:"},
		{"bad-zone", &schedule.Schedule{Cron: "@daily", Timezone: "Mars/Olympus", To: slackChat, Answer: "post", Text: "x"}, "schedules.bad-zone.timezone:"},
		{"no-to", &schedule.Schedule{Cron: "@daily", Answer: "post", Text: "x"}, "schedules.no-to.to.platform is required"},
		{"no-text", &schedule.Schedule{Cron: "@daily", To: slackChat, Answer: "post"}, "schedules.no-text.text:"},
		{"no-prompt", &schedule.Schedule{Cron: "@daily", To: slackChat, Answer: "agent"}, "schedules.no-prompt.prompt:"},
		{"bad-answer", &schedule.Schedule{Cron: "@daily", To: slackChat, Answer: "shout", Text: "x"}, "schedules.bad-answer.answer:"},
		{"bad-missed", &schedule.Schedule{Cron: "@daily", To: slackChat, Answer: "post", Text: "x", Missed: "twice"}, "schedules.bad-missed.missed:"},
		{"Bad Name", &schedule.Schedule{Cron: "@daily", To: slackChat, Answer: "post", Text: "x"}, "schedules.Bad Name: a name is"},
	}
	for _, c := range cases {
		conf := schedule.DefaultConfig()
		conf.Schedules = map[string]*schedule.Schedule{c.name: c.s}
		err := conf.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Validate() = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestTimezone: a schedule's fields are read in its time zone.
func TestTimezone(t *testing.T) {
	s, err := schedule.Parse("0 9 * * *", "Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Next(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 3, 2, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("09:00 in Shanghai after midnight UTC = %v, want %v", got, want)
	}
}
