package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// referenceMessage is how a sanitised history message was converted to
// go-openai's request type before the agent wrote request bodies itself;
// the bodies must still decode to what it produced.
func referenceMessage(m sessions.Message) openai.ChatCompletionMessage {
	if m.Kind == sessions.KindInjection || m.Kind == sessions.KindSummary {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content}
	}
	out := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
	if m.Role == openai.ChatMessageRoleAssistant && len(m.ToolCalls) > 0 {
		for _, c := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
	}
	return out
}

// awkwardHistory exercises every rule of Sanitize and every escape.
func awkwardHistory() []sessions.Message {
	return []sessions.Message{
		{Role: "assistant", Content: "cut off by the length cap: dropped"},
		{Role: "tool", ToolCallID: "x", Content: "orphan: dropped"},
		{Role: "user", Content: "quotes \" backslash \\ <html> & newline\n tab\t control \x01 unicode 这是 \u2028 emoji 🙂 invalid \xff"},
		{Role: "assistant", Content: "calling", ToolCalls: []sessions.ToolCall{
			{ID: "c1", Name: "kept", Arguments: `{"q":"<a>"}`},
			{ID: "c2", Name: "unanswered", Arguments: `{}`},
			{ID: "c1", Name: "repeated id", Arguments: `{}`},
		}},
		{Role: "tool", ToolCallID: "c1", Name: "kept", Content: "result 1"},
		{Role: "tool", ToolCallID: "c1", Name: "kept", Content: "second result of c1: dropped"},
		{Role: "assistant", ToolCalls: []sessions.ToolCall{{ID: "c9", Name: "never answered"}}},
		{Role: "user", Content: "skill body", Kind: sessions.KindInjection, Name: "s"},
		{Role: "assistant", Content: "", Kind: sessions.KindSummary},
		{Role: "user", Content: "summary text", Kind: sessions.KindSummary},
		{Role: "user", Content: ""},
		{Role: "narrator", Content: "unknown role: dropped"},
		{Role: "assistant", Content: "the last answer"},
	}
}

// TestRequestBodiesDecodeToWhatGoOpenAISent: the body the agent writes
// decodes, with go-openai's types, to the request go-openai built from the
// sanitised history, and is valid JSON however awkward the text.
func TestRequestBodiesDecodeToWhatGoOpenAISent(t *testing.T) {
	h := newHarness(t, Config{MaxTokens: 321}, []Tool{textTool("lookup", "found")})
	history := awkwardHistory()
	h.run(t, TurnRequest{History: stored(t, history...), UserText: "and now? \u00e9 \"q\"", SystemExtra: "## Skills\n- <x>"})

	raw := h.srv.RawRequests()[0]
	if !json.Valid(raw) {
		t.Fatalf("the request body is not JSON:\n%s", raw)
	}
	var got openai.ChatCompletionRequest
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := openai.ChatCompletionRequest{Model: "test-model", MaxCompletionTokens: 321,
		Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true}}
	want.Messages = append(want.Messages, openai.ChatCompletionMessage{Role: "system", Content: h.agent.SystemPrompt("## Skills\n- <x>")})
	for _, m := range Sanitize(history) {
		want.Messages = append(want.Messages, referenceMessage(m))
	}
	want.Messages = append(want.Messages, openai.ChatCompletionMessage{Role: "user", Content: "and now? \u00e9 \"q\""})
	want.Tools = got.Tools // checked below
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("request decodes to\n%s\nwant\n%s", g, w)
	}
	if len(got.Tools) != 1 || got.Tools[0].Function.Name != "lookup" || got.Tools[0].Type != openai.ToolTypeFunction {
		t.Fatalf("tools = %+v", got.Tools)
	}
}

func TestSanitizedHistoryKeepsTheRulesOnStoredEntries(t *testing.T) {
	got := Sanitize(awkwardHistory())
	var roles []string
	for _, m := range got {
		roles = append(roles, m.Role+":"+m.Kind+":"+fmt.Sprint(len(m.ToolCalls)))
	}
	want := "user::0 assistant::1 tool::0 user:injection:0 user:summary:0 assistant::0"
	if strings.Join(roles, " ") != want {
		t.Fatalf("sanitised = %s\nwant        %s", strings.Join(roles, " "), want)
	}
}

// TestAPlainTurnAllocatesTheSameAtAnyHistoryLength: the stored history is
// sent without being decoded, so a longer history costs no allocation
// more (issue 15, item 4).
func TestAPlainTurnAllocatesTheSameAtAnyHistoryLength(t *testing.T) {
	srv := openaitest.Constant(t, "fine")
	a := New(Config{Model: "bench"}, NewClient(srv.URL, "k", nil), nil, nil, nil)
	allocs := func(n int) float64 {
		req := TurnRequest{Channel: "console", History: stored(t, plainHistory(n)...), UserText: "and now?"}
		return testing.AllocsPerRun(50, func() {
			if res, err := a.Run(context.Background(), req); err != nil || res.Failed {
				t.Fatalf("Run = %+v, %v", res, err)
			}
		})
	}
	short, long := allocs(10), allocs(200)
	t.Logf("allocations per turn: %.0f with 10 messages of history, %.0f with 200", short, long)
	if long > short+10 {
		t.Fatalf("a turn allocates %.0f times with 10 messages of history and %.0f with 200; want the same", short, long)
	}
}

// TestAStreamedTurnAllocatesTheSameAtAnyHistoryLength: reading the
// answer as a stream adds nothing that grows with the history either.
func TestAStreamedTurnAllocatesTheSameAtAnyHistoryLength(t *testing.T) {
	srv := openaitest.ConstantStream(t, "fine, and here is a longer answer in pieces", 8)
	a := New(Config{Model: "bench"}, NewClient(srv.URL, "k", nil), nil, nil, nil)
	var pieces int
	allocs := func(n int) float64 {
		req := TurnRequest{Channel: "console", History: stored(t, plainHistory(n)...), UserText: "and now?",
			Events: func(e Event) { pieces++ }}
		return testing.AllocsPerRun(50, func() {
			if res, err := a.Run(context.Background(), req); err != nil || res.Failed || res.Reply != "fine, and here is a longer answer in pieces" {
				t.Fatalf("Run = %+v, %v", res, err)
			}
		})
	}
	short, long := allocs(10), allocs(200)
	t.Logf("allocations per streamed turn: %.0f with 10 messages of history, %.0f with 200", short, long)
	if pieces == 0 {
		t.Fatal("the turns were not streamed")
	}
	if long > short+10 {
		t.Fatalf("a streamed turn allocates %.0f times with 10 messages of history and %.0f with 200; want the same", short, long)
	}
}

// plainHistory is n messages of ordinary chat.
func plainHistory(n int) []sessions.Message {
	h := make([]sessions.Message, 0, n)
	for i := range n {
		if i%2 == 0 {
			h = append(h, sessions.Message{Role: "user", Content: fmt.Sprintf("question %d: how do I roll back the last deploy of the payments service?", i)})
		} else {
			h = append(h, sessions.Message{Role: "assistant", Content: fmt.Sprintf("answer %d: run the rollback job from the deploy dashboard, then watch the error rate for ten minutes.", i)})
		}
	}
	return h
}
