package media

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// FuzzPrepare: any bytes, claimed as an image or a file, give one line
// for the model and never a panic; an image sent is one that decoded, and
// a quoted text stays inside its fence.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02"), true)
	f.Add([]byte("GIF89a\x01\x00\x01\x00"), true)
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), true)
	f.Add([]byte("\xff\xd8\xff\xe0"), false)
	f.Add([]byte("plain ``` text\n````\n"), false)
	f.Add([]byte{0, 1, 2, 3}, false)
	cfg := DefaultConfig()
	cfg.MaxDownloadBytes, cfg.MaxTextBytes, cfg.MaxImagePixels = 1<<20, 4<<10, 1<<20
	p := New(cfg)
	f.Fuzz(func(t *testing.T, data []byte, image bool) {
		a := channels.Attachment{Kind: channels.AttachmentFile, ID: "F", Name: "x"}
		if image {
			a.Kind = channels.AttachmentImage
		}
		fetch := func(_ context.Context, _ channels.Attachment, limit int64) (io.ReadCloser, error) {
			return channels.CapBody(io.NopCloser(bytes.NewReader(data)), limit), nil
		}
		r := p.Prepare(context.Background(), fetch, []channels.Attachment{a}, true)
		if len(r.Items) != 1 || r.Text == "" {
			t.Fatalf("items %+v text %q", r.Items, r.Text)
		}
		if len(r.Images) > 0 && (r.Items[0].Outcome != OutcomeOK && r.Items[0].Outcome != OutcomeDownscaled) {
			t.Fatalf("an image was sent with outcome %q", r.Items[0].Outcome)
		}
		if r.Items[0].Outcome == OutcomeOK && r.Items[0].Kind == channels.AttachmentFile {
			lines := strings.Split(r.Text, "\n")
			open := 1
			if strings.HasPrefix(lines[1], "[only the first") {
				open = 2
			}
			fence := lines[open]
			if len(fence) < 3 || strings.Trim(fence, "`") != "" || lines[len(lines)-2] != fence {
				t.Fatalf("no fence around the quote:\n%s", r.Text)
			}
			for _, l := range lines[open+1 : len(lines)-2] {
				if strings.HasPrefix(strings.TrimSpace(l), fence) {
					t.Fatalf("a line inside can close the fence:\n%s", r.Text)
				}
			}
		}
	})
}
