package section_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/triggers/schedule"
	_ "github.com/parleyhq/parley/triggers/section"
	"github.com/parleyhq/parley/triggers/webhook"
)

// load reads body as a configuration file.
func load(t *testing.T, body string) (config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.LoadWithWarnings(path, func(string) string { return "" })
	return cfg, err
}

// TestEachSourceReadsItsOwnPart: one triggers: mapping of the file, each
// package's keys read back by that package's FromConfig, the defaults of
// the keys the file leaves out set by their owner.
func TestEachSourceReadsItsOwnPart(t *testing.T) {
	cfg, err := load(t, `triggers:
  min_interval: 1h
  schedules:
    digest: {cron: "0 9 * * *", to: {platform: slack, workspace: T1, chat: C1}, answer: post, text: Good morning}
  webhooks:
    am: {kind: alertmanager, token: s3cret, to: {platform: slack, workspace: T1, chat: C2}}
`)
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.FromConfig(cfg)
	if s.MinInterval != time.Hour || s.MaxPerChat != 10 || s.Schedules["digest"] == nil || s.Schedules["digest"].Text != "Good morning" {
		t.Errorf("schedules part = %+v", s)
	}
	w := webhook.FromConfig(cfg)
	if w.Webhooks["am"] == nil || w.Webhooks["am"].To.Chat != "C2" || w.Webhooks["am"].DedupWindow != webhook.DefaultDedupWindow {
		t.Errorf("webhooks part = %+v", w.Webhooks)
	}
	printed, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"triggers:", "schedules:", "digest:", "max_per_chat: 10", "webhooks:", "am:"} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("parley config check prints no %q:\n%s", want, printed)
		}
	}
	if strings.Contains(string(printed), "s3cret") {
		t.Error("the printed configuration shows the webhook's token")
	}
}

// TestProblemsOfEitherPartNameTheirKeyAndLine: the parts validate their
// own keys, and config check still places each problem on its line, an
// unknown key beside them.
func TestProblemsOfEitherPartNameTheirKeyAndLine(t *testing.T) {
	_, err := load(t, `triggers:
  max_per_chat: -1
  webhooks:
    am: {kind: nagios, token: s3cret, to: {platform: slack, workspace: T1, chat: C2}}
  schedules:
    digest: {cron: "61 9 * * *", to: {platform: slack, workspace: T1, chat: C1}, answer: post, text: hi}
  schedule_typo: 1
`)
	var inv *config.Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v; want the problems listed", err)
	}
	got := strings.Join(inv.List, "\n")
	for _, want := range []string{
		"line 2: triggers.max_per_chat:",
		"line 4: triggers.webhooks.am.kind:",
		"line 6: triggers.schedules.digest.cron:",
		`line 7: unknown key "schedule_typo" in triggers`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3cret") {
		t.Error("a problem shows the token")
	}
}

// TestAConfigBuiltByHandGetsEachPartsDefaults: no triggers: section at
// all (a Config built in code) still gives each source its defaults.
func TestAConfigBuiltByHandGetsEachPartsDefaults(t *testing.T) {
	var c config.Config
	if s := schedule.FromConfig(c); s.MaxPerChat != 10 || s.MinInterval != 15*time.Minute {
		t.Errorf("schedules = %+v", s)
	}
	if w := webhook.FromConfig(c); len(w.Webhooks) != 0 {
		t.Errorf("webhooks = %+v", w.Webhooks)
	}
}
