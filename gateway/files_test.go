package gateway_test

import (
	"bytes"
	"context"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
)

// slackLimits are what the fake platform takes, as Slack does.
var slackLimits = channels.FileLimits{MaxImage: 1 << 30, MaxFile: 1 << 30}

// toolResults are the tool messages the model was given in request i.
func toolResults(model *openaitest.Server, i int) []string {
	var out []string
	for _, m := range model.Requests()[i].Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

func offered(model *openaitest.Server, i int) []string {
	var names []string
	for _, tool := range model.Requests()[i].Tools {
		names = append(names, tool.Function.Name)
	}
	return names
}

// sendPanel is the model of the first test: the Grafana-like
// tool renders a panel, the model sends it with a caption, then answers.
func sendPanel(model *openaitest.Server) {
	model.Script(
		openaitest.Tools(openaitest.Call("files__render_panel", `{}`)),
		openaitest.Tools(openaitest.Call("send_file", `{"id":"att_1","caption":"error rate, last hour"}`)),
		openaitest.Text("Here is the panel."),
	)
}

// TestAnMCPImageIsSentOnceInTheAnswersThread: an MCP server returns an
// image; the model sees it as att_1, calls send_file; the answer goes out,
// then one upload of the image in the answer's thread, counted.
func TestAnMCPImageIsSentOnceInTheAnswersThread(t *testing.T) {
	t.Parallel()
	r, model := redistest.New(t), openaitest.New(t)
	fs := newFilesServer(t, 20<<20)
	ch := newUploadChannel(slackLimits)
	rp := newFileReplica(t, r, fs, model, ch, fileRig{})
	sendPanel(model)
	submit(t, rp.gw, msg("1700000000.000100", "E1", "show me the error rate"))
	got := ch.waitUploads(t, 1)
	ch.waitFor(t, 0, "with the answer", textIs("Here is the panel."))
	f := got[0].file
	if got[0].thread != "1700000000.000100" || f.Type != "image/png" || f.Name != "image.png" || f.Caption != "error rate, last hour" || !bytes.Equal(f.Data, fs.panel) {
		t.Errorf("uploaded %s %s %q in thread %q (%d bytes); want the panel in the answer's thread", f.Name, f.Type, f.Caption, got[0].thread, len(f.Data))
	}
	results := toolResults(model, 1)
	if len(results) != 1 || !strings.Contains(results[0], "[image att_1: image/png, ") || !strings.Contains(results[0], "from files__render_panel]") {
		t.Errorf("the model was given %q; want the image described as att_1", results)
	}
	if r := toolResults(model, 2); len(r) != 2 || !strings.Contains(r[1], "will be sent with your answer") {
		t.Errorf("send_file's result = %q", r)
	}
	if !slices.Contains(offered(model, 0), "send_file") {
		t.Errorf("offered %v; want send_file", offered(model, 0))
	}
	waitMetric(t, func() float64 {
		return testutil.ToFloat64(rp.metrics.FilesSent.WithLabelValues("slack", metrics.FileSent))
	}, 1)
	if n := testutil.ToFloat64(rp.metrics.FilesSentBytes.WithLabelValues("slack")); n != float64(len(fs.panel)) {
		t.Errorf("bytes sent = %v; want %d", n, len(fs.panel))
	}
	if n := len(ch.uploads()); n != 1 {
		t.Errorf("%d uploads; want 1", n)
	}
}

// TestAFailedUploadIsSentOnceNotTwice: an upload failing once is tried
// again and sent once; one the platform took before its answer timed out
// is found again by its key on the next try, not uploaded twice.
func TestAFailedUploadIsSentOnceNotTwice(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		step uploadStep
	}{{"failing once", uploadFail}, {"timing out after the platform took it", uploadLost}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, model := redistest.New(t), openaitest.New(t)
			fs := newFilesServer(t, 20<<20)
			ch := newUploadChannel(slackLimits, tt.step)
			rp := newFileReplica(t, r, fs, model, ch, fileRig{})
			sendPanel(model)
			submit(t, rp.gw, msg("t1", "E1", "show me"))
			ch.waitUploads(t, 1)
			waitMetric(t, func() float64 {
				return testutil.ToFloat64(rp.metrics.FilesSent.WithLabelValues("slack", metrics.FileSent))
			}, 1)
			tries := ch.tries()
			if len(ch.uploads()) != 1 || len(tries) != 2 || tries[0] || !tries[1] {
				t.Errorf("%d files held after tries (again flags) %v; want one file, two tries, the second with again", len(ch.uploads()), tries)
			}
		})
	}
}

// TestAChartIsRenderedAndSent: send_file with a chart spec draws it in
// process and the PNG goes out.
func TestAChartIsRenderedAndSent(t *testing.T) {
	t.Parallel()
	r, model := redistest.New(t), openaitest.New(t)
	fs := newFilesServer(t, 20<<20)
	ch := newUploadChannel(slackLimits)
	rp := newFileReplica(t, r, fs, model, ch, fileRig{})
	model.Script(
		openaitest.Tools(openaitest.Call("send_file", `{"caption":"5xx","chart":{"type":"line","title":"Error rate","series":[{"name":"api","points":[[1767225600,0.1],[1767225660,0.3],[1767225720,0.2]]}]}}`)),
		openaitest.Text("Charted."),
	)
	submit(t, rp.gw, msg("t1", "E1", "chart the error rate"))
	f := ch.waitUploads(t, 1)[0].file
	cfg, format, err := image.DecodeConfig(bytes.NewReader(f.Data))
	if err != nil || format != "png" || cfg.Width != agentfiles.ChartWidth || cfg.Height != agentfiles.ChartHeight || f.Name != "Error rate.png" || f.Caption != "5xx" {
		t.Errorf("uploaded %s (%q) decoding as %v %s %v; want the chart's PNG", f.Name, f.Caption, cfg, format, err)
	}
}

// TestSendFileDeniedByPolicy: tools.deny and files.send: false each keep
// send_file from being offered, and a call the model makes anyway is
// refused and sends nothing; a chat whose channel takes no files is not
// offered it either while files.send is unset.
func TestSendFileDeniedByPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		pol    policy.Config
		limits channels.FileLimits
	}{
		{"tools.deny", policy.Config{Default: config.Level{Tools: config.ToolRules{Deny: []string{"send_*"}}}}, slackLimits},
		{"files.send false", policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {Level: config.Level{Files: config.FileRules{Send: new(false)}}}}}, slackLimits},
		{"a channel that takes no files", policy.Config{}, channels.FileLimits{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, model := redistest.New(t), openaitest.New(t)
			fs := newFilesServer(t, 20<<20)
			ch := newUploadChannel(tt.limits)
			rp := newFileReplica(t, r, fs, model, ch, fileRig{pol: tt.pol})
			sendPanel(model)
			submit(t, rp.gw, msg("t1", "E1", "show me"))
			ch.waitFor(t, 0, "with the answer", textIs("Here is the panel."))
			if slices.Contains(offered(model, 0), "send_file") {
				t.Errorf("offered %v; want no send_file", offered(model, 0))
			}
			if r := toolResults(model, 2); len(r) != 2 || !strings.Contains(r[1], "not available in this conversation") {
				t.Errorf("the forced send_file got %q; want a refusal", r)
			}
			if n := testutil.ToFloat64(rp.metrics.ToolCalls.WithLabelValues("slack", "send_file", metrics.OutcomeDenied)); n != 1 {
				t.Errorf("denied send_file calls = %v; want 1", n)
			}
			if n := len(ch.uploads()); n != 0 {
				t.Errorf("%d uploads; want none", n)
			}
		})
	}
}

// TestBadFilesAreRefusedWithANote: a PNG claim that is HTML, an ELF
// claiming to be a PNG, a decompression bomb, a resource over
// files.max_bytes, a 2 GiB link and a link to an internal address are
// refused with a note and kept nowhere (the link is never fetched); a
// file with a path, a NUL and a look-alike extension is sent under a
// safe name of its sniffed type.
func TestBadFilesAreRefusedWithANote(t *testing.T) {
	t.Parallel()
	r, model := redistest.New(t), openaitest.New(t)
	const maxBytes = 64 << 10
	fs := newFilesServer(t, maxBytes)
	ch := newUploadChannel(slackLimits)
	rp := newFileReplica(t, r, fs, model, ch, fileRig{files: &agentfiles.Config{MaxBytes: maxBytes, MaxPerTurn: 10}})
	bad := []string{"forged_html", "forged_elf", "bomb", "huge", "huge_link", "internal_link"}
	var calls []openaitest.ToolCall
	for _, name := range bad {
		calls = append(calls, openaitest.Call("files__"+name, `{}`))
	}
	model.Script(
		openaitest.Tools(calls...),
		openaitest.Tools(openaitest.Call("files__named", `{}`)),
		openaitest.Tools(openaitest.Call("send_file", `{"id":"att_1"}`), openaitest.Call("send_file", `{"id":"att_2"}`)),
		openaitest.Text("Sent what I could."),
	)
	submit(t, rp.gw, msg("t1", "E1", "send me everything"))
	ch.waitFor(t, 0, "with the answer", textIs("Sent what I could."))
	results := toolResults(model, 1)
	wants := []string{"HTML page", "executable program", "too large to decode", "files.max_bytes", "not fetched", "not fetched"}
	for i, want := range wants {
		if i >= len(results) || !strings.Contains(results[i], want) || strings.Contains(results[i], "att_") {
			t.Errorf("%s's result = %q; want refused (%q) with no id", bad[i], results[min(i, len(results)-1)], want)
		}
	}
	if n := fs.hits.Load(); n != 0 {
		t.Errorf("the internal address was requested %d times", n)
	}
	named := toolResults(model, 2)
	if len(named) != 7 || !strings.Contains(named[6], "[file att_1: application/pdf") {
		t.Fatalf("the named file's result = %q", named[len(named)-1])
	}
	got := ch.waitUploads(t, 1)
	if f := got[0].file; f.Name != "q3report.pdf" || f.Type != "application/pdf" {
		t.Errorf("uploaded %q as %s; want q3report.pdf, application/pdf", f.Name, f.Type)
	}
	if sent := toolResults(model, 3); !strings.Contains(sent[len(sent)-1], `no file "att_2"`) {
		t.Errorf("send_file of an id never kept = %q", sent[len(sent)-1])
	}
	if n := len(ch.uploads()); n != 1 {
		t.Errorf("%d uploads; want 1", n)
	}
}

// TestAFileOverThePlatformsLimitIsNotedInText: an image over MaxImage
// is scaled down to fit; a file over MaxFile is refused and its caption
// and a note go in text; nothing is uploaded whole.
func TestAFileOverThePlatformsLimitIsNotedInText(t *testing.T) {
	t.Parallel()
	r, model := redistest.New(t), openaitest.New(t)
	fs := newFilesServer(t, 20<<20)
	limits := channels.FileLimits{MaxImage: int64(len(fs.panel)) / 2, MaxFile: 10}
	ch := newUploadChannel(limits)
	rp := newFileReplica(t, r, fs, model, ch, fileRig{})
	model.Script(
		// One batch each: the reads of a batch run at once, in no order.
		openaitest.Tools(openaitest.Call("files__render_panel", `{}`)),
		openaitest.Tools(openaitest.Call("files__named", `{}`)),
		openaitest.Tools(openaitest.Call("send_file", `{"id":"att_1"}`), openaitest.Call("send_file", `{"id":"att_2","caption":"Q3"}`)),
		openaitest.Text("Both attached."),
	)
	submit(t, rp.gw, msg("t1", "E1", "send both"))
	got := ch.waitUploads(t, 1)
	if f := got[0].file; int64(len(f.Data)) > limits.MaxImage || !f.Image() {
		t.Errorf("uploaded %s of %d bytes; want the image scaled within %d", f.Type, len(f.Data), limits.MaxImage)
	}
	ch.waitFor(t, 0, "with the note", textHas("Q3\n(I made a file for you, q3report.pdf (application/pdf"))
	waitMetric(t, func() float64 {
		return testutil.ToFloat64(rp.metrics.FilesSent.WithLabelValues("slack", metrics.FileRefused))
	}, 1)
	if n := len(ch.uploads()); n != 1 {
		t.Errorf("%d uploads; want only the scaled image", n)
	}
}

// TestAPausedTurnResumedOnAnotherReplicaSendsItsFile: a turn keeps an
// image, then pauses for approval of a write; its replica stops; the
// approval is decided on another replica, which resumes the turn; the
// model sends att_1 there (or had asked to before the pause), and the
// file goes out once.
func TestAPausedTurnResumedOnAnotherReplicaSendsItsFile(t *testing.T) {
	t.Parallel()
	send := openaitest.Tools(openaitest.Call("send_file", `{"id":"att_1","caption":"before and after"}`))
	appendCall := openaitest.Tools(openaitest.Call("files__append", `{}`))
	for _, tt := range []struct {
		name  string
		steps []openaitest.Step
	}{
		{"sent after the pause", []openaitest.Step{appendCall, send}},
		{"sent before the pause", []openaitest.Step{send, appendCall}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, model := redistest.New(t), openaitest.New(t)
			fs := newFilesServer(t, 20<<20)
			ch := newUploadChannel(slackLimits)
			pol := policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {Level: config.Level{
				Tools: config.ToolRules{ApproveWrites: new(true)}, Admins: []string{"UADMIN"}}}}}
			a := newFileReplica(t, r, fs, model, ch, fileRig{pol: pol})
			steps := append([]openaitest.Step{openaitest.Tools(openaitest.Call("files__render_panel", `{}`))}, tt.steps...)
			model.Script(append(steps, openaitest.Text("Logged, and here is the panel."))...)
			submit(t, a.gw, msg("t1", "E1", "render, log, send"))
			p := ch.waitFor(t, 0, "with an approval prompt", isPrompt)
			code := ch.at(p).Approval.Code
			a.stop()
			b := newFileReplica(t, r, fs, model, ch, fileRig{pol: pol})
			submit(t, b.gw, channels.Message{ID: "E2", Channel: "slack", Workspace: "T1", Chat: "C1", Thread: "t1", User: "UADMIN", Text: "/approve " + code})
			ch.waitFor(t, p, "with the answer", textIs("Logged, and here is the panel."))
			got := ch.waitUploads(t, 1)
			if got[0].thread != "t1" || !bytes.Equal(got[0].file.Data, fs.panel) || got[0].file.Caption != "before and after" {
				t.Errorf("uploaded %q in %q; want the panel in t1", got[0].file.Caption, got[0].thread)
			}
			waitMetric(t, func() float64 {
				return testutil.ToFloat64(b.metrics.FilesSent.WithLabelValues("slack", metrics.FileSent))
			}, 1)
			if n, appended := len(ch.uploads()), fs.appended.Load(); n != 1 || appended != 1 {
				t.Errorf("%d uploads, %d appends; want one each", n, appended)
			}
		})
	}
}

// waitMetric waits for a counter to reach want (it is counted after the
// upload the test saw).
func waitMetric(t *testing.T, read func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for read() != want {
		if time.Now().After(deadline) {
			t.Fatalf("metric = %v; want %v", read(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTheConsoleWritesTheFileUnderItsHome: on the console (no outbox:
// the upload is made by delivery itself) the file is written under
// $PARLEY_HOME/files and its path printed, once, after the answer.
func TestTheConsoleWritesTheFileUnderItsHome(t *testing.T) {
	t.Parallel()
	r, model := redistest.New(t), openaitest.New(t)
	fs := newFilesServer(t, 20<<20)
	dir := filepath.Join(t.TempDir(), "files")
	var printed syncBuffer
	ch := console.New("c1", "tester", console.Options{FilesDir: dir, FileOut: &printed})
	rp := newFileReplica(t, r, fs, model, ch, fileRig{})
	sendPanel(model)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := ch.Ask(ctx, rp.gw, "show me the panel")
	if err != nil || reply.Text != "Here is the panel." {
		t.Fatalf("Ask = %q, %v", reply.Text, err)
	}
	// The file is counted once its upload is done: only then is it
	// under its name (it is written as a hidden part file first).
	waitMetric(t, func() float64 {
		return testutil.ToFloat64(rp.metrics.FilesSent.WithLabelValues("console", metrics.FileSent))
	}, 1)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "image-") || filepath.Ext(entries[0].Name()) != ".png" {
		t.Fatalf("files under %s: %v; want one image-….png", dir, entries)
	}
	path := filepath.Join(dir, entries[0].Name())
	if data, _ := os.ReadFile(path); !bytes.Equal(data, fs.panel) {
		t.Errorf("%s holds %d bytes; want the panel", path, len(data))
	}
	if got := printed.String(); !strings.Contains(got, "error rate, last hour\n[file: "+path+"]") {
		t.Errorf("printed %q; want the caption and the path", got)
	}
}
