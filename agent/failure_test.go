package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/sessions"
)

// TestFailureApologies: a model that is down gets "try again later", one
// that refuses the bot's own settings gets "tell an admin", and the log
// says which.
func TestFailureApologies(t *testing.T) {
	down := func(status int) []openaitest.Step {
		return []openaitest.Step{openaitest.Error(status), openaitest.Error(status), openaitest.Error(status), openaitest.Error(status)}
	}
	tests := []struct {
		name    string
		script  []openaitest.Step
		want    Failure
		wantLog string
	}{
		{"400 bad request", []openaitest.Step{openaitest.Error(400)}, Misconfigured, "failure=misconfigured"},
		{"401 bad key", []openaitest.Step{openaitest.Error(401)}, Misconfigured, "failure=misconfigured"},
		{"403 forbidden", []openaitest.Step{openaitest.Error(403)}, Misconfigured, "failure=misconfigured"},
		{"404 unknown model", []openaitest.Step{openaitest.Error(404).WithBody(`{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","code":"model_not_found"}}`)}, Misconfigured, "failure=misconfigured"},
		{"429 after the retries", down(429), ModelDown, "failure=model_down"},
		{"500 after the retries", down(500), ModelDown, "failure=model_down"},
		{"503 after the retries", down(503), ModelDown, "failure=model_down"},
		{"undecodable answers", []openaitest.Step{openaitest.Malformed("<html>"), openaitest.Malformed("<html>"), openaitest.Malformed("<html>"), openaitest.Malformed("<html>")}, ModelDown, "failure=model_down"},
		// A base URL that names a web site: one attempt, and the log says
		// what to check.
		{"200 text/html", []openaitest.Step{openaitest.Malformed("<!doctype html><title>Sign in</title>").WithHeader("Content-Type", "text/html; charset=utf-8")}, Misconfigured, "the response was text/html, not JSON: check model.base_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, Config{}, nil)
			h.agent.log = slog.New(slog.NewTextHandler(&logs, nil))
			h.srv.Script(tt.script...)
			res := h.run(t, TurnRequest{UserText: "hi"})
			wantReply := map[Failure]string{ModelDown: ApologyReply, Misconfigured: MisconfiguredReply}[tt.want]
			if !res.Failed || res.Failure != tt.want || res.Reply != wantReply {
				t.Fatalf("result = %+v, want %v with %q", res, tt.want, wantReply)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, logs.String())
			}
			if h.srv.Remaining() != 0 {
				t.Errorf("%d scripted answers left: the retries were not used as expected", h.srv.Remaining())
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there any more
		a := New(Config{Model: "m", MaxRetries: 1, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}, NewClient("http://"+addr+"/v1", "k", nil), nil, nil, nil)
		res, err := a.Run(context.Background(), TurnRequest{UserText: "hi"})
		if err != nil || res.Failure != ModelDown || res.Reply != ApologyReply {
			t.Fatalf("Run = %+v, %v; want the model-down apology", res, err)
		}
	})
}

// TestTurnTimeoutBoundsRetries: a stalled model costs one turn deadline,
// not (1 + retries) × the request timeout plus backoffs.
func TestTurnTimeoutBoundsRetries(t *testing.T) {
	h := newHarness(t, Config{Timeout: time.Hour, TurnTimeout: 100 * time.Millisecond, MaxRetries: 3}, nil)
	h.srv.Script(openaitest.Delay(time.Hour), openaitest.Delay(time.Hour), openaitest.Delay(time.Hour), openaitest.Delay(time.Hour))
	// The caller's own deadline is far later: reaching it means the turn
	// deadline did not work.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.agent.Run(ctx, TurnRequest{Channel: "console", UserText: "are you there?"})
	if err != nil {
		t.Fatalf("Run = %v; want the apology at the turn deadline", err)
	}
	if !res.Failed || res.Failure != ModelDown || res.Reply != ApologyReply || len(res.Messages) != 1 {
		t.Fatalf("result = %+v; want the model-down apology and the user message only", res)
	}
	if n := h.srv.RequestCount(); n != 1 {
		t.Errorf("requests = %d, want 1: the deadline ends the turn, it is not retried", n)
	}
}

// TestTurnTimeoutDuringTools: the deadline passing while tools run ends
// the turn with the apology instead of another request.
func TestTurnTimeoutDuringTools(t *testing.T) {
	wait := funcTool{name: "wait", fn: func(ctx context.Context, _ *TurnContext, _ json.RawMessage) (Result, error) {
		<-ctx.Done()
		return Result{Content: "interrupted"}, nil
	}}
	h := newHarness(t, Config{TurnTimeout: 100 * time.Millisecond}, []Tool{wait})
	h.srv.Script(openaitest.Tools(openaitest.Call("wait", "{}")), openaitest.Text("never"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.agent.Run(ctx, TurnRequest{UserText: "hi"})
	if err != nil || res.Failure != ModelDown || res.Reply != ApologyReply {
		t.Fatalf("Run = %+v, %v; want the apology at the deadline", res, err)
	}
	if n := h.srv.RequestCount(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

// TestCutAnswerSaysSo: finish_reason "length" is told to the user; the
// history keeps the model's text as it was.
func TestCutAnswerSaysSo(t *testing.T) {
	h := newHarness(t, Config{MaxTokens: 5}, nil)
	h.srv.Script(openaitest.Step{Text: "The first three steps are", FinishReason: "length"}, openaitest.Text("complete"))
	res := h.run(t, TurnRequest{UserText: "steps?"})
	if !res.Cut || res.Reply != "The first three steps are"+CutNote {
		t.Errorf("reply = %q (cut %v); want the text and the note", res.Reply, res.Cut)
	}
	want := []sessions.Message{{Role: "user", Content: "steps?"}, {Role: "assistant", Content: "The first three steps are",
		Usage: &sessions.Usage{Model: "default", Prompt: res.Usage.Prompt, Completion: res.Usage.Completion}}}
	if !reflect.DeepEqual(res.Messages, want) {
		t.Errorf("stored %+v, want %+v", res.Messages, want)
	}
	if res := h.run(t, TurnRequest{UserText: "again"}); res.Cut || res.Reply != "complete" {
		t.Errorf("a whole answer = %q (cut %v)", res.Reply, res.Cut)
	}
}
