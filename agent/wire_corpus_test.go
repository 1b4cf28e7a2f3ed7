package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/metrics"
	openai "github.com/sashabaranov/go-openai"
)

// The corpus in testdata/wire holds answers real model servers sent,
// streamed and whole, each file citing where it was published. A file is
// a header of "# key: value" lines, a blank line, then the body exactly as
// the server sent it:
//
//	# source: URL of the published transcript (required)
//	# status: the HTTP status (default 200)
//	# content-type: the response's Content-Type
//	# want-reply: the reply the user gets ("done" after tool calls: the
//	  second request is answered with that text)
//	# want-failure: the Failure (default none)
//	# want-calls: the calls, [{"name": …, "arguments": {…}}]
//	# want-results: a text each tool result must contain
//	# want-usage: {"prompt":…, "completion":…, "cached":…, "reasoning":…}
//	# want-requests: the requests the turn sent (default 1, or 2 with calls)
//	# want-log: a text the turn's log must contain (the server's message)
//	# want-resent: a text the request after the tool calls must carry
//	  (what a provider wants sent back, such as DeepSeek's reasoning)
//	# note: how the transcript was taken from its source, where it was
//	  abbreviated there

// wireCase is one file of the corpus.
type wireCase struct {
	name        string
	header      map[string]string
	body        []byte
	status      int
	reply       string
	failure     Failure
	calls       []wantCall
	results     string
	usage       Usage
	requests    int
	logContains string
	resent      string
}

type wantCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func readWireCase(t *testing.T, path string) wireCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := wireCase{name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), header: map[string]string{}, status: 200}
	sc := bufio.NewReader(bytes.NewReader(raw))
	for {
		line, err := sc.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: the header never ends", path)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), ": ")
		if !strings.HasPrefix(line, "# ") {
			t.Fatalf("%s: header line %q does not start with \"# \"", path, line)
		}
		if ok {
			c.header[key] = strings.TrimSpace(value)
		}
	}
	c.body, _ = readAll(sc)
	if !strings.HasPrefix(c.header["source"], "https://") {
		t.Fatalf("%s: no source URL", path)
	}
	if s := c.header["status"]; s != "" {
		if c.status, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s: status %q", path, s)
		}
	}
	c.reply = c.header["want-reply"]
	c.results = c.header["want-results"]
	c.logContains = c.header["want-log"]
	c.resent = c.header["want-resent"]
	if f := c.header["want-failure"]; f != "" {
		byName := map[string]Failure{}
		for _, f := range []Failure{ModelDown, Misconfigured, ContextTooLong, Filtered} {
			byName[f.String()] = f
		}
		var ok bool
		if c.failure, ok = byName[f]; !ok {
			t.Fatalf("%s: unknown failure %q", path, f)
		}
	}
	if s := c.header["want-calls"]; s != "" {
		if err := json.Unmarshal([]byte(s), &c.calls); err != nil {
			t.Fatalf("%s: want-calls: %v", path, err)
		}
	}
	if s := c.header["want-usage"]; s != "" {
		var u struct{ Prompt, Completion, Cached, Reasoning int }
		if err := json.Unmarshal([]byte(s), &u); err != nil {
			t.Fatalf("%s: want-usage: %v", path, err)
		}
		c.usage = Usage{Prompt: u.Prompt, Completion: u.Completion, Cached: u.Cached, Reasoning: u.Reasoning}
	}
	c.requests = 1
	if len(c.calls) > 0 {
		c.requests = 2
	}
	if s := c.header["want-requests"]; s != "" {
		if c.requests, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s: want-requests %q", path, s)
		}
	}
	return c
}

func readAll(r *bufio.Reader) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// step is the recorded answer as the fake server sends it.
func (c wireCase) step() openaitest.Step {
	s := openaitest.Step{Status: c.status}
	if ct := c.header["content-type"]; ct != "" {
		s = s.WithHeader("Content-Type", ct)
	}
	if c.status >= 400 {
		s.Body = string(c.body)
	} else {
		s.Raw = string(c.body)
	}
	return s
}

// logBuffer collects a turn's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestWireCorpus replays every recorded answer through the real HTTP path
// (the agent's client against a server sending the recorded bytes) and
// checks what the user and the model get of it: the reply or the failure,
// the tool calls by name and arguments, their results, the usage, and that
// answers that can never succeed are not sent again.
func TestWireCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/wire/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("the corpus has %d transcripts; it must keep at least 30", len(files))
	}
	for _, path := range files {
		c := readWireCase(t, path)
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.New(t)
			// After tool calls the model is asked again and says "done",
			// reporting no tokens, so the usage is the recorded answer's.
			srv.Script(c.step(), openaitest.Text("done").WithUsage(openai.Usage{}))
			reg := NewRegistry()
			for _, call := range c.calls {
				if _, ok := reg.Get(call.Name); !ok {
					if err := reg.Register(textTool(call.Name, "ok")); err != nil {
						t.Fatal(err)
					}
				}
			}
			var logs logBuffer
			a := New(Config{Model: "recorded", MaxRetries: 2, BackoffBase: time.Microsecond, BackoffMax: time.Microsecond,
				Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }},
				NewClient(srv.URL(), "sk-test", nil), reg, metrics.New(), slog.New(slog.NewTextHandler(&logs, nil)))
			res, err := a.Run(context.Background(), TurnRequest{Channel: "console", UserText: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != c.failure {
				t.Errorf("failure = %v, want %v (reply %q)\nlog:\n%s", res.Failure, c.failure, res.Reply, logs.String())
			}
			if c.reply != "" && res.Reply != c.reply {
				t.Errorf("reply = %q, want %q", res.Reply, c.reply)
			}
			if got := srv.RequestCount(); got != c.requests {
				t.Errorf("requests = %d, want %d", got, c.requests)
			}
			checkCalls(t, res, c)
			if c.failure == NoFailure && res.Usage != c.usage {
				t.Errorf("usage = %+v, want %+v", res.Usage, c.usage)
			}
			if raw := srv.RawRequests(); c.resent != "" && (len(raw) < 2 || !bytes.Contains(raw[1], []byte(c.resent))) {
				t.Errorf("the request after the calls does not carry %q", c.resent)
			}
			if c.logContains != "" && !strings.Contains(logs.String(), c.logContains) {
				t.Errorf("the log does not hold %q:\n%s", c.logContains, logs.String())
			}
		})
	}
}

// checkCalls compares the calls the turn stored with the wanted ones,
// arguments as JSON values, and their results with want-results.
func checkCalls(t *testing.T, res TurnResult, c wireCase) {
	t.Helper()
	var got []wantCall
	var results []string
	for _, m := range res.Messages {
		for _, call := range m.ToolCalls {
			got = append(got, wantCall{Name: call.Name, Arguments: json.RawMessage(call.Arguments)})
		}
		if m.Role == openai.ChatMessageRoleTool {
			results = append(results, m.Content)
		}
	}
	if len(got) != len(c.calls) {
		t.Fatalf("calls = %s, want %s", show(got), show(c.calls))
	}
	for i := range got {
		if got[i].Name != c.calls[i].Name || !sameJSON(got[i].Arguments, c.calls[i].Arguments) {
			t.Errorf("call %d = %s, want %s", i, show(got[i]), show(c.calls[i]))
		}
	}
	for _, r := range results {
		if c.results != "" && !strings.Contains(r, c.results) {
			t.Errorf("tool result %q does not hold %q", r, c.results)
		}
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
