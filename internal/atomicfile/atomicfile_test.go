package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: a new file and a replaced one hold exactly the bytes
// written, in a subfolder too, with nothing else left in the folder; a
// write that cannot be renamed into place (a folder holds its name)
// fails and leaves no temporary file.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, step := range []struct{ name, data string }{
		{"a.txt", "first"}, {"a.txt", "second, longer"}, {"sub/b.txt", "in a folder"},
	} {
		if err := Write(root, step.name, []byte(step.data), 0o600); err != nil {
			t.Fatalf("Write(%s): %v", step.name, err)
		}
		if got, err := root.ReadFile(step.name); err != nil || string(got) != step.data {
			t.Fatalf("%s holds %q, %v; want %q", step.name, got, err, step.data)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub", "taken"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "taken", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(root, "sub/taken", []byte("x"), 0o600); err == nil {
		t.Error("Write over a folder that is not empty succeeded")
	}
	for folder, want := range map[string][]string{".": {"a.txt", "sub"}, "sub": {"b.txt", "taken"}} {
		entries, _ := os.ReadDir(filepath.Join(dir, folder))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != len(want) || names[0] != want[0] || names[1] != want[1] {
			t.Errorf("%s holds %v; want %v", folder, names, want)
		}
	}
}
