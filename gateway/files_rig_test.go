package gateway_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/agent"
	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/agent/mcp/mcptest"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// uploadStep is how one Upload attempt of the fake platform goes.
type uploadStep int

const (
	uploadOK uploadStep = iota
	// uploadFail: a 503 before the platform took anything.
	uploadFail
	// uploadLost: the platform took the file, then the answer timed out.
	uploadLost
)

// upload is a file the fake platform holds, with the thread it went to.
type upload struct {
	key    string
	thread string
	file   channels.File
}

// uploadChannel is a fake platform that posts part by part (through the
// outbox) and takes files natively: each Upload attempt goes as its
// script says, and the platform finds a file again by its key, as
// Slack's and Feishu's adapters do with their markers.
type uploadChannel struct {
	*recorder
	limits channels.FileLimits

	mu       sync.Mutex
	script   []uploadStep
	held     []upload // what the platform holds
	attempts []bool   // the again flag of each attempt
	posts    []string
}

var (
	_ channels.Poster   = (*uploadChannel)(nil)
	_ channels.Uploader = (*uploadChannel)(nil)
)

func newUploadChannel(limits channels.FileLimits, script ...uploadStep) *uploadChannel {
	return &uploadChannel{recorder: newRecorder("slack"), limits: limits, script: script}
}

func (c *uploadChannel) Parts(_ channels.Message, r channels.Reply) []string { return []string{r.Text} }
func (c *uploadChannel) Pace() channels.Pace                                 { return channels.Pace{} }

func (c *uploadChannel) Post(ctx context.Context, m channels.Message, part string) (string, error) {
	c.mu.Lock()
	c.posts = append(c.posts, part)
	c.mu.Unlock()
	return "p", c.recorder.Send(ctx, m, channels.Reply{Text: part})
}

func (c *uploadChannel) FileLimits(channels.Message) channels.FileLimits { return c.limits }

func (c *uploadChannel) Upload(_ context.Context, m channels.Message, f channels.File, key string, again bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts = append(c.attempts, again)
	if again {
		for _, u := range c.held {
			if u.key == key {
				return "found:" + key, nil
			}
		}
	}
	step := uploadOK
	if len(c.script) > 0 {
		step, c.script = c.script[0], c.script[1:]
	}
	switch step {
	case uploadFail:
		return "", &channels.PostError{Retry: true, Err: errors.New("fake: 503")}
	case uploadLost:
		c.held = append(c.held, upload{key: key, thread: m.Thread, file: f})
		return "", &channels.PostError{Retry: true, Err: context.DeadlineExceeded}
	}
	c.held = append(c.held, upload{key: key, thread: m.Thread, file: f})
	return "msg:" + key, nil
}

func (c *uploadChannel) uploads() []upload {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]upload(nil), c.held...)
}

func (c *uploadChannel) tries() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.attempts...)
}

// waitUploads waits until the platform holds n files.
func (c *uploadChannel) waitUploads(t *testing.T, n int) []upload {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(c.uploads()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the platform holds %d files; want %d (replies: %q)", len(c.uploads()), n, c.texts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c.uploads()
}

// bombOf is a 1×1 PNG whose header claims w×h pixels.
func bombOf(t *testing.T, w, h uint32) []byte {
	out := testPNG(t, 1, 1)
	binary.BigEndian.PutUint32(out[16:], w)
	binary.BigEndian.PutUint32(out[20:], h)
	binary.BigEndian.PutUint32(out[29:], crc32.ChecksumIEEE(out[12:29]))
	return out
}

// filesServer is a real MCP server whose tools return files, good and
// bad, and a write tool (append) that waits for approval where writes do.
type filesServer struct {
	url      string
	internal *httptest.Server // an internal address a link points at
	hits     atomic.Int64     // requests that reached it
	appended atomic.Int64
	panel    []byte
	bigBlob  int
}

func newFilesServer(t *testing.T, maxBytes int64) *filesServer {
	t.Helper()
	fs := &filesServer{panel: testPNG(t, 64, 48), bigBlob: int(maxBytes) + 1}
	fs.internal = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fs.hits.Add(1)
		io.WriteString(w, "secret")
	}))
	t.Cleanup(fs.internal.Close)
	s := mcptest.New("files")
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	add := func(name string, content ...sdk.Content) {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Returns " + name + ".", Annotations: ro},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: content}, nil, nil
			})
	}
	twoGiB := int64(2 << 30)
	add("render_panel", &sdk.TextContent{Text: "the panel"}, &sdk.ImageContent{MIMEType: "image/png", Data: fs.panel})
	add("forged_html", &sdk.ImageContent{MIMEType: "image/png", Data: []byte("<!DOCTYPE html><html><script>alert(1)</script></html>")})
	add("forged_elf", &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///tmp/chart.png", MIMEType: "image/png", Blob: append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 120)...)}})
	add("bomb", &sdk.ImageContent{MIMEType: "image/png", Data: bombOf(t, 60000, 60000)})
	add("huge", &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///dump.bin", MIMEType: "application/octet-stream", Blob: make([]byte, fs.bigBlob)}})
	add("huge_link", &sdk.ResourceLink{URI: "https://example.com/dump.tar", Name: "dump", Size: &twoGiB})
	add("internal_link", &sdk.ResourceLink{URI: fs.internal.URL + "/latest/meta-data", Name: "metadata", MIMEType: "image/png"})
	add("named", &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///srv/../../etc/q3\x00report.pdf.exe", MIMEType: "application/x-msdownload", Blob: []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")}})
	sdk.AddTool(s, &sdk.Tool{Name: "append", Description: "Appends a line."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return mcptest.Text("appended line " + string(rune('0'+fs.appended.Add(1)))), nil, nil
		})
	srv := httptest.NewServer(mcptest.Handler(s))
	t.Cleanup(srv.Close)
	fs.url = srv.URL
	return fs
}

// fileReplica is one gateway with the files server's tools, send_file,
// the files kept in the shared Redis and an outbox.
type fileReplica struct {
	gw      *gateway.Gateway
	store   *sessions.RedisStore
	metrics *metrics.Metrics
}

type fileRig struct {
	pol     policy.Config
	files   *agentfiles.Config
	noFiles bool // the gateway keeps no files at all
}

func newFileReplica(t *testing.T, r *redistest.Redis, fs *filesServer, model *openaitest.Server, ch channels.Channel, rig fileRig) *fileReplica {
	t.Helper()
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: time.Second})
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tools := agent.NewRegistry()
	if err := tools.Register(agentfiles.SendFile{}); err != nil {
		t.Fatal(err)
	}
	mgr, err := mcp.New(mcp.Config{Servers: map[string]mcp.ServerConfig{"files": {URL: fs.url}}}, mcp.Options{Registry: tools})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	var keeper *agentfiles.Keeper
	var kept outbox.Files
	if !rig.noFiles {
		keeper = agentfiles.NewKeeper(store, rig.files)
		kept = keeper
	}
	ob := outbox.New(r.Client, r.Prefix, outbox.Config{Lease: 2 * time.Second, Poll: 20 * time.Millisecond,
		MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond, Files: kept}, m, log)
	gcfg := gateway.Config{Tools: tools, Policy: policy.New(rig.pol), SweepEvery: 50 * time.Millisecond, Outbox: ob,
		Approvals: approval.New(r.Client, store.Key), Files: keeper}
	a := agent.New(agent.Config{Model: "test", Timeout: 10 * time.Second}, agent.NewClient(model.URL(), "sk", nil), tools, m, log)
	gw := gateway.New(gcfg, store, a, m, log)
	gw.Register(ch)
	gw.Start()
	rp := &fileReplica{gw: gw, store: store, metrics: m}
	t.Cleanup(func() { rp.stop() })
	return rp
}

func (rp *fileReplica) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rp.gw.Shutdown(ctx)
}
