package outbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/outbox"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// filePlatform is a fake chat that posts text and takes files: while
// down its uploads fail before it takes anything, while lossy it takes
// them and the answer is lost, while refuse it refuses them for good; it
// finds an upload again by its key.
type filePlatform struct {
	mu      sync.Mutex
	down    bool
	lossy   bool
	refuse  bool
	held    map[string]channels.File
	tries   int
	posts   []string
	finding int // tries that found an upload by its key
}

func (p *filePlatform) Name() string { return "fake" }
func (p *filePlatform) Send(context.Context, channels.Message, channels.Reply) error {
	return nil
}
func (p *filePlatform) Parts(_ channels.Message, r channels.Reply) []string { return []string{r.Text} }
func (p *filePlatform) Pace() channels.Pace                                 { return channels.Pace{} }
func (p *filePlatform) Post(_ context.Context, _ channels.Message, part string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts = append(p.posts, part)
	return "p", nil
}
func (p *filePlatform) FileLimits(channels.Message) channels.FileLimits {
	return channels.FileLimits{MaxImage: 1 << 20, MaxFile: 1 << 20}
}
func (p *filePlatform) Upload(_ context.Context, _ channels.Message, f channels.File, key string, again bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries++
	if _, ok := p.held[key]; ok && again {
		p.finding++
		return "found", nil
	}
	switch {
	case p.refuse:
		return "", &channels.PostError{Err: errors.New("fake: not allowed")}
	case p.down:
		return "", &channels.PostError{Retry: true, Err: errors.New("fake: 503")}
	case p.lossy:
		// The platform takes the bytes, then the answer is lost.
		p.held[key] = f
		return "", &channels.PostError{Retry: true, Err: context.DeadlineExceeded}
	}
	p.held[key] = f
	return "up", nil
}

func (p *filePlatform) set(down, lossy, refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.lossy, p.refuse = down, lossy, refuse
}

func (p *filePlatform) state() (held, tries, finding int, posts []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held), p.tries, p.finding, append([]string(nil), p.posts...)
}

// TestAFileItemIsUploadedOnceAcrossReplicas: a file whose uploads fail
// is queued as an item naming the kept file; on another replica, an
// upload the platform took before its answer was lost is found again by
// its key on the next try instead of being sent again. A file the platform refuses for good is told in text,
// once, and counted failed; a file no longer kept is told so.
func TestAFileItemIsUploadedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	kept := &sessions.KeptFile{Name: "rows.csv", Type: "text/csv", Source: "db__query", Data: []byte("a,b\n1,2\n")}
	if _, err := store.KeepAttachment(ctx, "conv1", kept); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := outbox.Config{Lease: 2 * time.Second, Poll: 20 * time.Millisecond, MinWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond, Files: store}
	p := &filePlatform{held: map[string]channels.File{}, down: true}
	m := channels.Message{Channel: "fake", Chat: "C1", Thread: "t1"}
	ma := metrics.New()
	a := outbox.New(r.Client, r.Prefix, cfg, ma, log)
	if err := a.DeliverFile(ctx, p, m, "item1."+kept.ID, outbox.FileRef{Conversation: "conv1", ID: kept.ID, Caption: "rows"}); err != nil {
		t.Fatalf("DeliverFile = %v; want it queued", err)
	}
	if held, tries, _, _ := p.state(); held != 0 || tries != 3 {
		t.Fatalf("held %d after %d tries; want three tries, nothing taken", held, tries)
	}
	p.set(false, true, false)
	mb := metrics.New()
	b := outbox.New(r.Client, r.Prefix, cfg, mb, log)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.Run(runCtx, func(string) channels.Poster { return p }) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(mb.FilesSent.WithLabelValues("fake", metrics.FileSent)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the other replica never sent the file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if held, _, finding, posts := p.state(); held != 1 || finding != 1 || len(posts) != 0 {
		t.Errorf("held %d, found %d, posts %q; want the one upload found again and nothing posted", held, finding, posts)
	}

	// Refused for good: told once in text, counted failed.
	p.set(false, false, true)
	if err := a.DeliverFile(ctx, p, m, "item2."+kept.ID, outbox.FileRef{Conversation: "conv1", ID: kept.ID, Caption: "rows"}); err == nil {
		t.Error("DeliverFile of a refused file = nil; want its error")
	}
	// Gone: its note instead of an upload.
	p.set(false, false, false)
	if err := a.DeliverFile(ctx, p, m, "item3.att_9", outbox.FileRef{Conversation: "conv1", ID: "att_9"}); err != nil {
		t.Errorf("DeliverFile of a file no longer kept = %v", err)
	}
	_, _, _, posts := p.state()
	if len(posts) != 2 || !strings.Contains(posts[0], "rows\n(I could not send the file") || !strings.Contains(posts[1], "att_9, but it is no longer kept") {
		t.Errorf("posts = %q; want the refusal told, then the missing file", posts)
	}
	if f, g := testutil.ToFloat64(ma.FilesSent.WithLabelValues("fake", metrics.FileFailed)), testutil.ToFloat64(ma.FilesSent.WithLabelValues("fake", metrics.FileRefused)); f != 1 || g != 1 {
		t.Errorf("failed %v, refused %v; want 1 each", f, g)
	}
}
