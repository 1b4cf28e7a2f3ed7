package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeletVolume lays out files as kubelet lays out a ConfigMap volume at
// root: the files in a hidden timestamped folder, ..data a relative
// symlink to it, and each top-level entry a relative symlink into ..data.
// It returns a function that publishes new contents the way kubelet
// updates the volume (a new timestamped folder, ..data swapped, the old
// folder removed).
func kubeletVolume(t *testing.T, root string, files map[string]string) (update func(map[string]string)) {
	t.Helper()
	gen := 0
	publish := func(files map[string]string) {
		gen++
		stamp := "..2026_11_30_14_0" + string(rune('0'+gen)) + "_00.123456789"
		writeTree(t, filepath.Join(root, stamp), files)
		tmp := filepath.Join(root, "..data_tmp")
		symlinkOrSkip(t, stamp, tmp)
		old, _ := os.Readlink(filepath.Join(root, "..data"))
		if err := os.Rename(tmp, filepath.Join(root, "..data")); err != nil {
			t.Fatal(err)
		}
		for rel := range files {
			top := strings.SplitN(rel, "/", 2)[0]
			link := filepath.Join(root, top)
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			symlinkOrSkip(t, filepath.Join("..data", top), link)
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(root, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	publish(files)
	return publish
}

// TestKubernetesSkillsLoad: workspace skills mounted from a ConfigMap (each
// folder a symlink into ..data/, itself a symlink to a timestamped folder)
// load, their files can be read, and keep being readable after kubelet
// swaps in new contents. A symlink leading out of the layer root — absolute,
// or relative through ..data/../.. — is still never followed, and a link
// back to the root does not load a skill twice.
func TestKubernetesSkillsLoad(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	root := WorkspaceSkillsDir(ws)
	update := kubeletVolume(t, root, map[string]string{
		"incident-triage/SKILL.md":              skillMD("incident-triage", "Triage incidents.", "Ask for the service."),
		"incident-triage/references/runbook.md": "first version",
	})
	writeTree(t, outside, map[string]string{
		"stolen/SKILL.md":   skillMD("stolen", "Outside the root.", ""),
		"stolen/secret.txt": "host secret",
		"relative/SKILL.md": skillMD("relative", "Outside through ..data.", ""),
	})
	symlinkOrSkip(t, filepath.Join(outside, "stolen"), filepath.Join(root, "stolen"))
	rel, err := filepath.Rel(filepath.Join(root, "..data"), filepath.Join(outside, "relative"))
	if err != nil {
		t.Fatal(err)
	}
	symlinkOrSkip(t, filepath.Join("..data", rel), filepath.Join(root, "relative"))
	symlinkOrSkip(t, ".", filepath.Join(root, "loop"))

	c, err := Load(Layers{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	s := mustGet(t, c, "incident-triage")
	if s.Source != SourceWorkspace || !strings.Contains(readBody(t, s), "Ask for the service.") {
		t.Errorf("skill %+v", s)
	}
	for _, n := range []string{"stolen", "relative"} {
		if _, ok := c.Get(n); ok {
			t.Errorf("%s loaded through a symlink leaving the skills folder", n)
		}
	}
	if !hasWarning(c.Warnings(), "leads outside the skills folder") {
		t.Errorf("no warning for the links leaving the root: %v", c.Warnings())
	}
	if c.Len() != 1 {
		t.Errorf("%d skills loaded, want 1: %v", c.Len(), c.All())
	}
	out, err := ReadFile(s, "", "references/runbook.md", 0)
	if err != nil || !strings.Contains(out, "first version") {
		t.Fatalf("read a resource: %q, %v", out, err)
	}

	update(map[string]string{
		"incident-triage/SKILL.md":              skillMD("incident-triage", "Triage incidents.", "Ask for the service."),
		"incident-triage/references/runbook.md": "second version",
	})
	out, err = ReadFile(s, "", "references/runbook.md", 0)
	if err != nil || !strings.Contains(out, "second version") {
		t.Fatalf("read after a ConfigMap update: %q, %v", out, err)
	}

	// The skill folder re-pointed out of the root after loading is refused.
	if err := os.Remove(filepath.Join(root, "incident-triage")); err != nil {
		t.Fatal(err)
	}
	symlinkOrSkip(t, filepath.Join(outside, "stolen"), filepath.Join(root, "incident-triage"))
	if out, err := ReadFile(s, "", "secret.txt", 0); !errors.Is(err, ErrPathEscape) {
		t.Fatalf("read through a re-pointed link: %q, %v", out, err)
	}
}
