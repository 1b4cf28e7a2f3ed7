package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/parleyhq/parley/triggers/webhook"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/triggers/schedule"
)

// `parley triggers list` shows the file's schedules and a chat's, with
// their next fire and the latest result the schedulers recorded in Redis,
// as JSON and as a table; without REDIS_URL it says why it cannot.
func TestTriggersListShowsSchedules(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  prefix: %q
triggers:
  webhooks:
    alertmanager:
      kind: alertmanager
      token: s3cret-token
      to: {platform: slack, workspace: T0123, chat: C0456}
      answer: post
  schedules:
    digest:
      cron: "0 9 * * 1-5"
      timezone: Europe/Berlin
      to: {platform: slack, workspace: T0123, chat: C0456}
      answer: agent
      prompt: Post yesterday's incidents.
`, r.Prefix))
	ctx := context.Background()
	loaded, err := config.Load(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	conf := schedule.FromConfig(loaded)
	claims := schedule.NewClaims(r.Client, r.Prefix)
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	if err := claims.Record(ctx, "digest", schedule.Result{At: at, Done: at.Add(time.Second), Outcome: "fired"}); err != nil {
		t.Fatal(err)
	}
	id, refusal, err := schedule.NewChats(r.Client, r.Prefix, conf, nil).Add(ctx, channels.Message{Channel: "slack", Workspace: "T0123", Chat: "C0999", User: "U1"}, "@daily", "summarise the day")
	if err != nil || refusal != "" {
		t.Fatalf("Add = %q, %v", refusal, err)
	}
	if err := r.Client.HSet(ctx, r.Prefix+"trigger-webhook:last:alertmanager", "at", at.Format(time.RFC3339Nano), "outcome", "unauthorized").Err(); err != nil {
		t.Fatal(err)
	}
	list := func(env map[string]string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"triggers", "list", "--config", cfg}, args...), strings.NewReader(""), &out, &errb, mapEnv(env))
		return out.String(), errb.String(), code
	}
	env := map[string]string{"REDIS_URL": r.URL}
	out, errs, code := list(env, "--json")
	var got struct {
		Webhooks  []webhook.Status
		Schedules []schedule.Status
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("triggers list --json exited %d: %s %s", code, out, errs)
	}
	if len(got.Webhooks) != 1 || got.Webhooks[0].Name != "alertmanager" || got.Webhooks[0].Path != "/hooks/alertmanager" ||
		got.Webhooks[0].Last == nil || got.Webhooks[0].Last.Outcome != "unauthorized" {
		t.Errorf("webhooks = %+v, want alertmanager with its last request", got.Webhooks)
	}
	if strings.Contains(out, "s3cret-token") {
		t.Error("the listing shows the webhook's token")
	}
	if len(got.Schedules) != 2 {
		t.Fatalf("listed %+v, want the file's digest and the chat's", got.Schedules)
	}
	d, c := got.Schedules[0], got.Schedules[1]
	if d.Name != "digest" || d.Source != "config" || d.Cron != "0 9 * * 1-5" || d.To.Chat != "C0456" || d.Last == nil || d.Last.Outcome != "fired" || !d.Last.At.Equal(at) {
		t.Errorf("digest = %+v", d)
	}
	if h := d.Next.In(mustZone(t, "Europe/Berlin")); h.Hour() != 9 || h.Minute() != 0 || !d.Next.After(time.Now()) {
		t.Errorf("digest's next fire %v is not a coming 09:00 in Berlin", d.Next)
	}
	if c.Name != "chat-"+id || c.Source != "chat" || c.Cron != "@daily" || c.To.Chat != "C0999" || c.Answer != "agent" || c.Last != nil {
		t.Errorf("chat schedule = %+v", c)
	}
	out, _, code = list(env)
	if code != 0 || !strings.Contains(out, "SCHEDULE") || !strings.Contains(out, "fired 2026-03-02T08:00:00Z") || !strings.Contains(out, "chat-"+id) ||
		!strings.Contains(out, "unauthorized 2026-03-02T08:00:00Z") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}
	if _, errs, code := list(map[string]string{}); code != 1 || !strings.Contains(errs, "REDIS_URL is not set") {
		t.Errorf("without REDIS_URL: exit %d, %s", code, errs)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
