package live_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/skills/live"
)

// Without Redis the library keeps its state in the home folder, and its
// gauges follow the state and the reloads.
func TestLibraryGaugesFollowStateAndReloads(t *testing.T) {
	ctx := context.Background()
	m := metrics.New()
	lib, err := live.Open(live.Options{Home: t.TempDir(), Workspace: t.TempDir(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lib.State.(*skills.FileState); !ok {
		t.Fatalf("state is %T, want the file state without Redis", lib.State)
	}
	lib.Start(ctx)
	defer lib.Stop()
	builtins := lib.Registry.Catalog().Len()
	if builtins == 0 {
		t.Fatal("no builtin skills loaded")
	}
	known := func(state string) float64 {
		return testutil.ToFloat64(m.SkillsKnown.WithLabelValues(string(skills.SourceBuiltin), state))
	}
	if known("enabled") != float64(builtins) || known("disabled") != 0 {
		t.Fatalf("parley_skills{builtin} = %v enabled, %v disabled; want %d, 0", known("enabled"), known("disabled"), builtins)
	}
	if testutil.ToFloat64(m.SkillIndexBytes) == 0 {
		t.Error("parley_skill_index_bytes is 0 with enabled skills")
	}

	name := lib.Registry.Catalog().All()[0].Name
	if err := lib.State.(*skills.FileState).SetDisabled(ctx, name, true); err != nil {
		t.Fatal(err)
	}
	lib.Observe(ctx)
	if known("disabled") != 1 || known("enabled") != float64(builtins-1) {
		t.Errorf("after disabling %s: %v enabled, %v disabled", name, known("enabled"), known("disabled"))
	}

	if _, err := lib.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(m.SkillReloads.WithLabelValues(metrics.OutcomeOK)); n != 1 {
		t.Errorf("parley_skill_reloads_total{outcome=ok} = %v after one reload, want 1", n)
	}
}
