package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

func injectionOf(name, body string) sessions.Message {
	s := &skills.Skill{Name: name, Source: skills.SourceBuiltin, Dir: "/skills/" + name, Body: body}
	return sessions.Message{Role: "user", Content: skills.InjectionText(s), Kind: sessions.KindInjection}
}

func TestCompactDropsInjectionsAndNamesThem(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Text("The user is planning a trip to Kyoto in May."))
	history := []sessions.Message{
		{Role: "user", Content: "I want to plan a trip"},
		{Role: "assistant", ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "load_skill", Arguments: `{"name":"travel-planning"}`}}},
		{Role: "tool", ToolCallID: "c1", Name: "load_skill", Content: WrapToolResult("load_skill", "loaded")},
		injectionOf("travel-planning", "SECRET-SKILL-BODY step one"),
		{Role: "assistant", Content: "Where to?"},
		{Role: "user", Content: "Kyoto, in May"},
		injectionOf("japan-rail", "RAIL-BODY"),
		{Role: "assistant", Content: "Great choice."},
		{Role: "user", Content: "what about hotels?"},
		injectionOf("hotels", "HOTEL-BODY"),
		{Role: "assistant", Content: "Here are some."},
	}
	c, ok, err := h.agent.Compact(context.Background(), "console", history, 1)
	if err != nil || !ok {
		t.Fatalf("Compact = %v, %v", ok, err)
	}
	// The summariser saw the old rounds but none of the injected bodies.
	reqs := h.srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model saw %d requests", len(reqs))
	}
	sent := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	for _, body := range []string{"SECRET-SKILL-BODY", "RAIL-BODY", skills.InjectionMarker} {
		if strings.Contains(sent, body) {
			t.Errorf("summariser was shown %q:\n%s", body, sent)
		}
	}
	if !strings.Contains(sent, "Kyoto, in May") || strings.Contains(sent, "what about hotels?") {
		t.Errorf("summariser input has the wrong range:\n%s", sent)
	}
	if got := strings.Join(c.RemovedSkills, ","); got != "travel-planning,japan-rail" {
		t.Errorf("RemovedSkills = %q", got)
	}
	if c.Rounds != 2 || len(c.History) != 4 {
		t.Fatalf("compaction = %+v", c)
	}
	sum := c.History[0]
	if sum.Kind != sessions.KindSummary || sum.Role != "user" ||
		!strings.Contains(sum.Content, "Kyoto in May") ||
		!strings.HasSuffix(sum.Content, "travel-planning, japan-rail. Call load_skill again if you need them.") {
		t.Errorf("summary = %+v", sum)
	}
	// The newest round is kept verbatim, with its own injection.
	if c.History[1].Content != "what about hotels?" || c.History[2].Kind != sessions.KindInjection {
		t.Errorf("kept rounds = %+v", c.History[1:])
	}
}

func TestCompactNothingToDo(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	_, ok, err := h.agent.Compact(context.Background(), "console", []sessions.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}, 2)
	if ok || err != nil || h.srv.RequestCount() != 0 {
		t.Fatalf("ok=%v err=%v requests=%d; want nothing done", ok, err, h.srv.RequestCount())
	}
}

func TestCompactFoldsAnEarlierSummary(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.srv.Script(openaitest.Text("new summary"))
	history := []sessions.Message{
		{Role: "user", Content: summaryHeading + "\n\nold facts", Kind: sessions.KindSummary},
		{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"},
		{Role: "user", Content: "q2"}, {Role: "assistant", Content: "a2"},
	}
	c, ok, err := h.agent.Compact(context.Background(), "console", history, 1)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	sent := h.srv.Requests()[0].Messages[1].Content
	if !strings.Contains(sent, "old facts") || !strings.Contains(sent, "q1") {
		t.Errorf("summariser input lacks the earlier summary: %s", sent)
	}
	if len(c.History) != 3 || c.History[0].Content != summaryHeading+"\n\nnew summary" {
		t.Errorf("history = %+v", c.History)
	}
}

func TestEstimateTokens(t *testing.T) {
	ascii := EstimateTokens([]sessions.Message{{Role: "user", Content: strings.Repeat("abcd", 100)}})
	cjk := EstimateTokens([]sessions.Message{{Role: "user", Content: strings.Repeat("你好", 100)}})
	if ascii != 104 || cjk != 204 {
		t.Fatalf("estimates = %d, %d", ascii, cjk)
	}
}
