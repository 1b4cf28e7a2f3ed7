package console_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// writes is a terminal that records each write, so that a test can tell
// text printed as it came from text printed at the end.
type writes struct {
	mu  sync.Mutex
	buf bytes.Buffer
	n   int
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return w.buf.Write(p)
}

func (w *writes) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// chat is a console on a real gateway, agent and Redis, with a fake model.
type chat struct {
	ch    *console.Adapter
	gw    *gateway.Gateway
	store *sessions.RedisStore
	model *openaitest.Server
}

func newChat(t *testing.T, opts console.Options, model ...openaitest.Option) *chat {
	t.Helper()
	r := redistest.New(t)
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix, LockTTL: 5 * time.Second})
	srv := openaitest.New(t, model...)
	m := metrics.New()
	log := slog.New(slog.DiscardHandler)
	a := agent.New(agent.Config{Model: "test", MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond},
		agent.NewClient(srv.URL(), "sk-test", nil), nil, m, log)
	gw := gateway.New(gateway.Config{}, store, a, m, log)
	ch := console.New("live", "tester", opts)
	gw.Register(ch)
	gw.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return &chat{ch: ch, gw: gw, store: store, model: srv}
}

// stored is the conversation's last stored answer.
func (c *chat) stored(t *testing.T) string {
	t.Helper()
	h, err := c.store.History(context.Background(), "console::live:")
	if err != nil || len(h) == 0 {
		t.Fatalf("history = %v, %v", h, err)
	}
	return h[len(h)-1].Content
}

const answer = "Roll back from the deploy dashboard, then watch the error rate — 这是 fine 🙂."

// TestAskLivePrintsTheAnswerAsItIsWritten: the answer reaches the terminal
// in many writes while the model writes it, and what is printed is the
// stored answer and a newline, exactly as Ask's caller would print it.
func TestAskLivePrintsTheAnswerAsItIsWritten(t *testing.T) {
	c := newChat(t, console.Options{}, openaitest.WithChunkRunes(3), openaitest.WithChunkDelay(2*time.Millisecond))
	c.model.Script(openaitest.Text(answer))
	var out writes
	r, shown, err := c.ch.AskLive(context.Background(), c.gw, "how do I roll back?", &out)
	if err != nil || !shown || r.Text != answer {
		t.Fatalf("AskLive = %+v, shown %v, %v", r, shown, err)
	}
	if got := out.String(); got != answer+"\n" {
		t.Fatalf("printed %q, want the answer and a newline", got)
	}
	if out.n < 5 {
		t.Errorf("printed in %d writes, want the answer piece by piece", out.n)
	}
	if s := c.stored(t); s != answer {
		t.Errorf("stored %q, printed %q", s, answer)
	}
}

// TestREPLPrintsLiveAndTheSame: an interactive session prints live, and
// its transcript reads as one without live printing: prompt, answer,
// prompt. A notice (a command's answer) is printed once too.
func TestREPLPrintsLiveAndTheSame(t *testing.T) {
	var status bytes.Buffer
	c := newChat(t, console.Options{Live: true, Status: &status}, openaitest.WithChunkRunes(2))
	c.model.Script(openaitest.Text(answer))
	var out writes
	if err := c.ch.REPL(context.Background(), c.gw, strings.NewReader("hello\n/reset\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 4 || lines[1] != "> "+answer || !strings.HasPrefix(lines[2], "> ") || strings.Count(out.String(), answer) != 1 {
		t.Fatalf("transcript:\n%s", out.String())
	}
}

// TestAskLiveAfterACutStream: a stream that dies halfway leaves its
// printed part marked as withdrawn, and the answer follows whole on a line
// of its own, equal to the stored answer.
func TestAskLiveAfterACutStream(t *testing.T) {
	// The chunks are spaced so that the printer has shown the first
	// stream's text before it is cut: text withdrawn before it was ever
	// shown is dropped unprinted, with no note (right, but not this case).
	c := newChat(t, console.Options{}, openaitest.WithChunkRunes(3), openaitest.WithChunkDelay(40*time.Millisecond))
	c.model.Script(openaitest.Text(answer).CutAfter(6), openaitest.Text(answer))
	var out writes
	r, shown, err := c.ch.AskLive(context.Background(), c.gw, "again", &out)
	if err != nil || !shown || r.Text != answer {
		t.Fatalf("AskLive = %+v, shown %v, %v", r, shown, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(answer, lines[0]) || lines[1] != "[the answer was interrupted and starts again]" || lines[2] != answer {
		t.Fatalf("printed:\n%s", out.String())
	}
	if s := c.stored(t); s != answer {
		t.Errorf("stored %q", s)
	}
}

// TestAskIsNotLive: Ask prints nothing itself and returns the answer, as
// before.
func TestAskIsNotLive(t *testing.T) {
	c := newChat(t, console.Options{Live: true, Status: io.Discard})
	r, err := c.ch.Ask(context.Background(), c.gw, "hi")
	if err != nil || r.Text != "echo: hi" {
		t.Fatalf("Ask = %+v, %v", r, err)
	}
}

// TestTheConsolePrintsMarkdownAsPlainText: the model's Markdown reaches
// the terminal rendered, live in pieces of every size and in the REPL
// without live printing alike: no emphasis markers, headings as their
// text, links as "text (url)", bullets, code without its fences; the
// history keeps the Markdown.
func TestTheConsolePrintsMarkdownAsPlainText(t *testing.T) {
	const md = "# Rolling back\n\nUse **the dashboard** or *the CLI*, see [the runbook](https://runbook.example/rb).\n\n- first `step`\n- second\n\n```sh\nparley rollback --to **v1**\n```\nDone."
	want := "Rolling back\n\nUse the dashboard or the CLI, see the runbook (https://runbook.example/rb).\n\n• first step\n• second\n\n    parley rollback --to **v1**\nDone.\n"
	for _, runes := range []int{1, 3, 7, 1000} {
		c := newChat(t, console.Options{}, openaitest.WithChunkRunes(runes))
		c.model.Script(openaitest.Text(md))
		var out writes
		r, shown, err := c.ch.AskLive(context.Background(), c.gw, "how?", &out)
		if err != nil || !shown || r.Text != md {
			t.Fatalf("AskLive = %+v, shown %v, %v", r, shown, err)
		}
		if got := out.String(); got != want {
			t.Errorf("chunks of %d runes printed\n%s\nwant\n%s", runes, got, want)
		}
		if s := c.stored(t); s != md {
			t.Errorf("stored %q, want the Markdown", s)
		}
	}

	c := newChat(t, console.Options{})
	c.model.Script(openaitest.Text(md))
	var out writes
	if err := c.ch.REPL(context.Background(), c.gw, strings.NewReader("how?\n"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "> "+want) {
		t.Errorf("the REPL printed\n%s\nwant\n%s", out.String(), want)
	}
}
