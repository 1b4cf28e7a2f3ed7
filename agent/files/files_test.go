package files_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
)

// pngOf is a real PNG of w×h.
func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombPNG is a PNG whose header claims w×h but whose pixels are not
// there: what a decompression bomb looks like to DecodeConfig.
func bombPNG(t testing.TB, w, h uint32) []byte {
	t.Helper()
	b := pngOf(t, 1, 1)
	// IHDR's width and height are bytes 16..24.
	out := bytes.Clone(b)
	for i, v := range []uint32{w, h} {
		binary.BigEndian.PutUint32(out[16+4*i:], v)
	}
	// The chunk's CRC covers its type and data (bytes 12..29).
	binary.BigEndian.PutUint32(out[29:], crc32.ChecksumIEEE(out[12:29]))
	return out
}

func TestSniffRefusesWhatTheBytesBelie(t *testing.T) {
	t.Parallel()
	real := pngOf(t, 40, 30)
	tests := []struct {
		name, claim string
		data        []byte
		want        string
		err         error
	}{
		{"a real png", "image/png", real, "image/png", nil},
		{"a png claimed as text", "text/plain", real, "image/png", nil},
		{"HTML claiming png", "image/png", []byte("<!DOCTYPE html><html><body>hi</body></html>"), "", files.ErrHTML},
		{"an ELF claiming png", "image/png", append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...), "", files.ErrExecutable},
		{"a PE claiming pdf", "application/pdf", append([]byte("MZ\x90\x00"), make([]byte, 64)...), "", files.ErrExecutable},
		{"a script claiming csv", "text/csv", []byte("#!/bin/sh\nrm -rf /\n"), "", files.ErrExecutable},
		{"text claiming png", "image/png", []byte("just some words"), "", files.ErrForged},
		{"csv as claimed", "text/csv; charset=utf-8", []byte("a,b\n1,2\n"), "text/csv", nil},
		{"json as claimed", "application/json", []byte(`{"a":1}`), "application/json", nil},
		{"a pdf claimed as csv keeps pdf", "text/csv", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), "application/pdf", nil},
		{"a corrupt png", "image/png", real[:40], "", files.ErrBadImage},
		{"a decompression bomb", "image/png", bombPNG(t, 100000, 100000), "", files.ErrBomb},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := files.Sniff(tt.data, tt.claim)
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("Sniff = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestSafeNameKeepsABaseNameWithTheRightExtension(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, typ, want string }{
		{"panel.png", "image/png", "panel.png"},
		{"report.pdf.exe", "application/pdf", "report.pdf"},
		{"invoice.exe", "image/png", "invoice.png"},
		{"../../etc/passwd", "text/plain", "passwd.txt"},
		{`C:\Users\x\evil.bat`, "text/csv", "evil.csv"},
		{"a\x00b\r\nc\u202egnp.exe", "image/png", "abcgnp.png"},
		{".bashrc", "text/plain", "bashrc.txt"},
		{"", "image/jpeg", "file.jpg"},
		{"...", "application/json", "file.json"},
		{"q3.report.csv", "text/csv", "q3.report.csv"},
		{"photo.JPG", "image/jpeg", "photo.jpg"},
		{strings.Repeat("é", 200) + ".png", "image/png", strings.Repeat("é", 48) + ".png"},
	}
	for _, tt := range tests {
		if got := files.SafeName(tt.name, tt.typ); got != tt.want {
			t.Errorf("SafeName(%q, %s) = %q; want %q", tt.name, tt.typ, got, tt.want)
		}
	}
}

func TestChartRendersAPNGAndRefusesAnUnboundedSpec(t *testing.T) {
	t.Parallel()
	var spec files.ChartSpec
	if err := json.Unmarshal([]byte(`{"type":"line","title":"5xx rate","series":[
		{"name":"api","points":[[1767225600,0.2],[1767225660,0.4],[1767225720,0.1]]},
		{"name":"web","points":[[1767225600,0.1],[1767225720,0.3]]}]}`), &spec); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"line", "bar"} {
		spec.Type = typ
		out, err := files.Render(spec)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(out))
		if err != nil || format != "png" || cfg.Width != files.ChartWidth || cfg.Height != files.ChartHeight {
			t.Fatalf("%s: decoded %v %s %v; want a %dx%d png", typ, cfg, format, err, files.ChartWidth, files.ChartHeight)
		}
	}
	many := make([][2]float64, files.MaxChartPoints+1)
	manyJSON, _ := json.Marshal(many)
	for _, bad := range []string{
		`{"type":"pie","series":[{"points":[[1,1]]}]}`,
		`{"type":"line","series":[]}`,
		`{"type":"line","title":"` + strings.Repeat("t", files.MaxChartTitle+1) + `","series":[{"points":[[1,1]]}]}`,
		`{"type":"line","series":[{"points":` + string(manyJSON) + `}]}`,
		`{"type":"line","series":[` + strings.Repeat(`{"points":[[1,1]]},`, files.MaxChartSeries) + `{"points":[[1,1]]}]}`,
	} {
		var s files.ChartSpec
		if err := json.Unmarshal([]byte(bad), &s); err != nil {
			continue // refused as JSON: fine too
		}
		if _, err := files.Render(s); err == nil {
			t.Errorf("Render(%.80s) drew a chart; want a refusal", bad)
		}
	}
}

// TestSendFileMarksAKeptFileOrAChart: a file a tool made is kept and
// described with its id; send_file of that id, or of a chart, is
// returned to be sent, and an id the conversation does not have is
// refused. The files are kept in Redis, where another replica reads them.
func TestSendFileMarksAKeptFileOrAChart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: "t:"})
	keeper := files.NewKeeper(store, &files.Config{MaxBytes: 1 << 20, MaxPerTurn: 5})
	const conv = "slack:T:C:1"
	k, err := keeper.Keep(ctx, conv, "grafana__render_panel", agent.File{Name: "x", Type: "image/png", Data: pngOf(t, 20, 10)}, 0)
	if err != nil || k.ID != "att_1" || agent.DescribeFile(k) != "[image att_1: image/png, "+agent.ByteSize(k.Size)+", from grafana__render_panel]" {
		t.Fatalf("Keep = %+v, %v", k, err)
	}
	if _, err := keeper.Keep(ctx, conv, "s__t", agent.File{Type: "image/png", Data: make([]byte, 2<<20)}, 1); err == nil || !strings.Contains(err.Error(), "files.max_bytes") {
		t.Errorf("Keep of 2 MiB = %v; want refused by files.max_bytes", err)
	}
	if _, err := keeper.Keep(ctx, conv, "s__t", agent.File{Type: "image/png", Size: 2 << 30}, 1); err == nil || !strings.Contains(err.Error(), "files.max_bytes") {
		t.Errorf("Keep of a 2 GiB claim = %v; want refused by files.max_bytes", err)
	}
	if _, err := keeper.Keep(ctx, conv, "s__t", agent.File{Type: "text/csv", Data: []byte("a\n")}, 5); err == nil || !strings.Contains(err.Error(), "files.max_per_turn") {
		t.Errorf("Keep of a sixth file = %v; want refused by files.max_per_turn", err)
	}
	tc := agent.TurnContext{Channel: "slack", Conversation: conv}.WithFiles(keeper)
	res, err := files.SendFile{}.Call(ctx, tc, json.RawMessage(`{"id":"att_1","caption":"the panel"}`))
	if err != nil || len(res.Send) != 1 || res.Send[0] != (agent.Outgoing{ID: "att_1", Caption: "the panel"}) || !strings.Contains(res.Content, "will be sent") {
		t.Fatalf("send_file(att_1) = %+v, %v", res, err)
	}
	res, err = files.SendFile{}.Call(ctx, tc, json.RawMessage(`{"chart":{"type":"bar","title":"q","series":[{"name":"a","points":[["mon",1],["tue",2]]}]}}`))
	if err != nil || len(res.Send) != 1 || res.Send[0].ID != "att_2" {
		t.Fatalf("send_file(chart) = %+v, %v", res, err)
	}
	chart, err := store.Attachment(ctx, conv, "att_2")
	if err != nil || chart.Type != "image/png" || chart.Source != files.SendFileName {
		t.Fatalf("the chart kept = %+v, %v", chart.Type, err)
	}
	for _, bad := range []string{`{"id":"att_9"}`, `{"id":"../../x"}`, `{}`, `{"id":"att_1","chart":{"type":"line"}}`} {
		if res, err := (files.SendFile{}).Call(ctx, tc, json.RawMessage(bad)); err == nil {
			t.Errorf("send_file(%s) = %+v; want a refusal", bad, res)
		}
	}
}
