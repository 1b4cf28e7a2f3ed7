package commands

import (
	"context"
	"log/slog"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
)

// fakeSchedules records what /schedule asked of the chat's schedules.
type fakeSchedules struct {
	spec, prompt, removed string
}

func (f *fakeSchedules) Add(_ context.Context, _ channels.Message, spec, prompt string) (string, string, error) {
	f.spec, f.prompt = spec, prompt
	return "ab12cd34", "", nil
}

func (f *fakeSchedules) List(context.Context, channels.Message) (string, error) {
	return "the list", nil
}

func (f *fakeSchedules) Remove(_ context.Context, _ channels.Message, id string) (string, error) {
	f.removed = id
	return "", nil
}

// TestScheduleCommandReadsItsArguments: the cron expression is quoted
// (straight or curly quotes, as chat apps rewrite them) or a descriptor;
// anything else is answered with the usage, never stored; only an
// administrator runs it.
func TestScheduleCommandReadsItsArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text, spec, prompt, reply string
	}{
		{`/schedule add "0 9 * * 1-5" post the open incidents`, "0 9 * * 1-5", "post the open incidents", "Scheduled `ab12cd34`: `0 9 * * 1-5` (UTC) in this chat. `/schedule remove ab12cd34` stops it."},
		{"/schedule add “*/30 * * * *” check the queue", "*/30 * * * *", "check the queue", ""},
		{"/schedule add @daily the digest", "@daily", "the digest", ""},
		{`/schedule add "CRON_TZ=Europe/Berlin 0 9 * * 1-5" the digest`, "CRON_TZ=Europe/Berlin 0 9 * * 1-5", "the digest",
			"Scheduled `ab12cd34`: `0 9 * * 1-5` (Europe/Berlin) in this chat. `/schedule remove ab12cd34` stops it."},
		{`/schedule add "TZ=Asia/Tokyo @daily" the digest`, "TZ=Asia/Tokyo @daily", "the digest",
			"Scheduled `ab12cd34`: `@daily` (Asia/Tokyo) in this chat. `/schedule remove ab12cd34` stops it."},
		{"/schedule add 0 9 * * * unquoted", "", "", scheduleUsage},
		{`/schedule add "0 9 * * * no closing quote`, "", "", scheduleUsage},
		{"/schedule frobnicate", "", "", scheduleUsage},
		{"/schedule remove a b", "", "", scheduleUsage},
		{"/schedule", "", "", "the list"},
		{"/schedule list", "", "", "the list"},
	}
	eff := policy.New(policy.Config{}).WithOperator("slack", "boss").Resolve(policy.Scope{Channel: "slack"})
	for _, c := range cases {
		f := &fakeSchedules{}
		r := Standard(Deps{Schedules: f, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
		reply, ok, err := r.Run(context.Background(), nil, channels.Message{Channel: "slack", User: "boss"}, eff, c.text)
		if !ok || err != nil {
			t.Errorf("%s: ok %v, err %v", c.text, ok, err)
			continue
		}
		if f.spec != c.spec || f.prompt != c.prompt {
			t.Errorf("%s: added %q %q, want %q %q", c.text, f.spec, f.prompt, c.spec, c.prompt)
		}
		if c.reply != "" && reply != c.reply {
			t.Errorf("%s: reply %q, want %q", c.text, reply, c.reply)
		}
	}
	f := &fakeSchedules{}
	r := Standard(Deps{Schedules: f, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	reply, _, _ := r.Run(context.Background(), nil, channels.Message{Channel: "slack", User: "mallory"}, eff, `/schedule add "* * * * *" spam`)
	if f.spec != "" || reply != "Sorry, only an administrator of this chat can manage its schedules." {
		t.Errorf("a non-admin's /schedule add: stored %q, reply %q", f.spec, reply)
	}
	if reply, _, _ := r.Run(context.Background(), nil, channels.Message{Channel: "slack", User: "boss"}, eff, "/schedule remove ab12cd34"); f.removed != "ab12cd34" || reply != "Removed schedule `ab12cd34`." {
		t.Errorf("remove: removed %q, reply %q", f.removed, reply)
	}
}
