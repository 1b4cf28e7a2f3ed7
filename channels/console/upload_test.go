package console

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// TestUploadWritesUnderTheFilesDirOnce: a file is written under FilesDir
// and its path printed; a second try of its key finds it (one file, not
// two); another key writes another file; a name that tries to leave the
// directory stays in it; without a FilesDir the console takes no files.
func TestUploadWritesUnderTheFilesDirOnce(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "files")
	var printed bytes.Buffer
	c := New("c", "u", Options{FilesDir: dir, FileOut: &printed})
	ctx := context.Background()
	f := channels.File{Name: "panel.png", Type: "image/png", Data: []byte("png bytes"), Caption: "the panel"}
	path, err := c.Upload(ctx, channels.Message{}, f, "item.att_1", false)
	if err != nil || filepath.Dir(path) != dir || !strings.HasPrefix(filepath.Base(path), "panel-") || filepath.Ext(path) != ".png" {
		t.Fatalf("Upload = %q, %v; want a panel-….png under %s", path, err, dir)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "png bytes" {
		t.Fatalf("written = %q, %v", data, err)
	}
	if !strings.Contains(printed.String(), "the panel\n[file: "+path+"]") {
		t.Errorf("printed %q; want the caption and the path", printed.String())
	}
	again, err := c.Upload(ctx, channels.Message{}, f, "item.att_1", true)
	if err != nil || again != path {
		t.Fatalf("Upload again = %q, %v; want the first file found", again, err)
	}
	other, err := c.Upload(ctx, channels.Message{}, f, "item.att_2", false)
	if err != nil || other == path {
		t.Fatalf("Upload of another key = %q, %v; want a file of its own", other, err)
	}
	for _, name := range []string{"../../escape.png", "..", "/etc/passwd", `..\x.png`} {
		p, err := c.Upload(ctx, channels.Message{}, channels.File{Name: name, Type: "image/png", Data: []byte("x")}, "k"+name, false)
		if err != nil || filepath.Dir(p) != dir {
			t.Errorf("Upload(%q) = %q, %v; want a file under %s", name, p, err, dir)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		t.Errorf("%d files under %s; want 6 (one per key)", len(entries), dir)
	}
	if outside, _ := os.ReadDir(home); len(outside) != 1 {
		t.Errorf("%d entries in PARLEY_HOME; want only files/", len(outside))
	}
	if lim := New("c", "u", Options{}).FileLimits(channels.Message{}); lim != (channels.FileLimits{}) {
		t.Errorf("FileLimits without FilesDir = %+v; want none", lim)
	}
}

// TestAFileAppearsWhole: someone watching the files directory (the person
// at the terminal, a script) never finds a file under its name with less
// than all of its bytes, and no part file is left once it is written.
func TestAFileAppearsWhole(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "files")
	c := New("c", "u", Options{FilesDir: dir})
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB: a write that takes a while
	done := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		for {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					continue
				}
				if info, err := e.Info(); err == nil && info.Size() != int64(len(data)) {
					seen <- fmt.Sprintf("%s with %d of %d bytes", e.Name(), info.Size(), len(data))
					return
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	path, err := c.Upload(context.Background(), channels.Message{}, channels.File{Name: "big.bin", Data: data}, "item.att_1", false)
	close(done)
	if partial, ok := <-seen; ok {
		t.Errorf("found %s while it was written", partial)
	}
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || filepath.Join(dir, entries[0].Name()) != path {
		t.Errorf("files under %s: %v; want only %s", dir, entries, path)
	}
}
