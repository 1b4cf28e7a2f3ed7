package skills

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOpenFileState(t *testing.T) {
	tests := []struct {
		name     string
		content  *string
		warn     bool
		disabled map[string]bool
	}{
		{name: "missing", content: nil, disabled: map[string]bool{}},
		{name: "corrupt", content: ptr("{not json"), warn: true, disabled: map[string]bool{}},
		{name: "wrong types", content: ptr(`{"disabled": "pdf"}`), warn: true, disabled: map[string]bool{}},
		{name: "valid", content: ptr(`{"disabled":["pdf"],"trusted":[]}`), disabled: map[string]bool{"pdf": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.content != nil {
				writeTree(t, home, map[string]string{StateFileName: *tc.content})
			}
			st, warns := OpenFileState(home)
			if (len(warns) > 0) != tc.warn {
				t.Errorf("warnings %v, want warn=%v", warns, tc.warn)
			}
			got, err := st.Disabled(context.Background())
			if err != nil || !reflect.DeepEqual(got, tc.disabled) {
				t.Errorf("Disabled = %v, %v", got, err)
			}
			ok, err := st.Trusted(context.Background(), "/w/.parley/skills/x/SKILL.md", "abc")
			if err != nil || ok {
				t.Errorf("Trusted = %v, %v", ok, err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestFileStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, _ := OpenFileState(home)
	steps := []func() error{
		func() error { return st.SetDisabled(ctx, "pdf", true) },
		func() error { return st.SetDisabled(ctx, "web-access", true) },
		func() error { return st.SetDisabled(ctx, "pdf", true) }, // idempotent
		func() error { return st.SetDisabled(ctx, "web-access", false) },
		func() error { return st.Trust(ctx, "/w/.parley/skills/review/SKILL.md", "AAA") },
		func() error { return st.Trust(ctx, "/w/.parley/skills/other/SKILL.md", "bbb") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := st.SetDisabled(ctx, "Bad Name", true); err == nil {
		t.Error("invalid name accepted")
	}
	reopened, warns := OpenFileState(home)
	if len(warns) != 0 {
		t.Fatal(warns)
	}
	got, _ := reopened.Disabled(ctx)
	if !reflect.DeepEqual(got, map[string]bool{"pdf": true}) {
		t.Errorf("disabled %v", got)
	}
	trust := []struct {
		path, sha string
		want      bool
	}{
		{"/w/.parley/skills/review/SKILL.md", "aaa", true},
		{"/w/.parley/skills/review/../review/SKILL.md", "AAA", true},
		{"/w/.parley/skills/review/SKILL.md", "changed", false},
		{"/w/.parley/skills/review/SKILL.md", "", false},
		{"/w/.parley/skills/unknown/SKILL.md", "aaa", false},
	}
	for _, tc := range trust {
		if ok, err := reopened.Trusted(ctx, tc.path, tc.sha); err != nil || ok != tc.want {
			t.Errorf("Trusted(%s, %s) = %v, %v", tc.path, tc.sha, ok, err)
		}
	}
	// Re-trusting a changed file replaces the old fingerprint.
	if err := reopened.Trust(ctx, "/w/.parley/skills/review/SKILL.md", "ccc"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := reopened.Trusted(ctx, "/w/.parley/skills/review/SKILL.md", "aaa"); ok {
		t.Error("old fingerprint still trusted")
	}
	data, err := os.ReadFile(filepath.Join(home, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Disabled []string `json:"disabled"`
		Trusted  []struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
		} `json:"trusted"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Trusted) != 2 || raw.Disabled[0] != "pdf" {
		t.Errorf("file %s (%v)", data, err)
	}
	if fi, _ := os.Stat(filepath.Join(home, StateFileName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

func TestFileStateRepairsCorruptFile(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	writeTree(t, home, map[string]string{StateFileName: "garbage"})
	st, warns := OpenFileState(home)
	if len(warns) != 1 {
		t.Fatalf("warnings %v", warns)
	}
	if err := st.SetDisabled(ctx, "pdf", true); err != nil {
		t.Fatal(err)
	}
	if _, warns := OpenFileState(home); len(warns) != 0 {
		t.Errorf("still corrupt: %v", warns)
	}
}

func TestFileStateCancelledContext(t *testing.T) {
	st, _ := OpenFileState(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Disabled(ctx); err == nil {
		t.Error("Disabled ignored a cancelled context")
	}
	if err := st.SetDisabled(ctx, "pdf", true); err == nil {
		t.Error("SetDisabled ignored a cancelled context")
	}
}
