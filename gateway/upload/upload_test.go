package upload_test

import (
	"bytes"
	"image"
	"image/png"
	"math/rand"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/upload"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// noisyPNG is a w×h PNG that compresses badly, so that it is large.
func noisyPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rand.New(rand.NewSource(1)).Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestScaleDownFitsTheLimit(t *testing.T) {
	t.Parallel()
	data := noisyPNG(t, 320, 240)
	for _, limit := range []int64{int64(len(data)) / 2, 8 << 10} {
		out, typ, err := upload.ScaleDown(data, limit)
		if err != nil {
			t.Fatalf("ScaleDown to %d: %v", limit, err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(out))
		if err != nil || int64(len(out)) > limit || "image/"+format != typ || cfg.Width > 320 || cfg.Width*3 != cfg.Height*4 {
			t.Errorf("ScaleDown to %d = %d bytes of %s %dx%d (%v); want a smaller image of the same shape within the limit", limit, len(out), typ, cfg.Width, cfg.Height, err)
		}
	}
	if _, _, err := upload.ScaleDown(data, 10); err == nil {
		t.Error("ScaleDown to 10 bytes succeeded")
	}
}

func TestPrepareFitsTheChatOrSaysWhyNot(t *testing.T) {
	t.Parallel()
	img := noisyPNG(t, 120, 90)
	pdf := []byte("%PDF-1.7\n" + strings.Repeat("x", 100))
	kept := func(name, typ string, data []byte) sessions.KeptFile {
		return sessions.KeptFile{ID: "att_1", Name: name, Type: typ, Data: data, Size: int64(len(data))}
	}
	lim := channels.FileLimits{MaxImage: int64(len(img)) / 3, MaxFile: 50}
	// An image over MaxImage is scaled down, its name following its type.
	r := upload.Prepare(kept("../shot.exe", "image/png", img), "cap", lim, true)
	if r.Note != "" || int64(len(r.File.Data)) > lim.MaxImage || !r.File.Image() || (r.File.Name != "shot.png" && r.File.Name != "shot.jpg") || r.File.Caption != "cap" {
		t.Errorf("an image over the limit = %+v; want it scaled, named shot.*", r.File.Name)
	}
	// A file over MaxFile is refused with a note naming it and the limit.
	r = upload.Prepare(kept("q3.pdf", "application/pdf", pdf), "Q3", lim, true)
	if r.Outcome != metrics.FileRefused || !strings.HasPrefix(r.Note, "Q3\n") || !strings.Contains(r.Note, "q3.pdf") || !strings.Contains(r.Note, "50 bytes") {
		t.Errorf("a file over the limit = %+v", r)
	}
	// No Uploader, or a zero limit: the caption and a note.
	for _, tt := range []struct {
		lim channels.FileLimits
		up  bool
	}{{channels.FileLimits{MaxImage: 1 << 20, MaxFile: 1 << 20}, false}, {channels.FileLimits{MaxFile: 1 << 20}, true}} {
		r = upload.Prepare(kept("a.png", "image/png", img), "look", tt.lim, tt.up)
		if r.Outcome != metrics.FileNoted || !strings.HasPrefix(r.Note, "look\n") {
			t.Errorf("Prepare(%+v, uploader %v) = %+v; want noted", tt.lim, tt.up, r)
		}
	}
	// Within the limits: sent as it is.
	r = upload.Prepare(kept("report.pdf.exe", "application/pdf", pdf), "", channels.FileLimits{MaxImage: 1 << 20, MaxFile: 1 << 20}, true)
	if r.Note != "" || r.File.Name != "report.pdf" || !bytes.Equal(r.File.Data, pdf) {
		t.Errorf("a file within the limits = %q, note %q", r.File.Name, r.Note)
	}
}
