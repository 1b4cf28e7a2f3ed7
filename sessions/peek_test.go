package sessions_test

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/sessions"
)

// checkPeek compares Peek and NextCall with encoding/json on one entry.
// Entries are written by encoding/json, so the comparison is on the
// message re-encoded that way (encoding/json also reads keys in another
// case, which Peek need not); the entry as given only must not crash Peek.
func checkPeek(t *testing.T, entry []byte) {
	t.Helper()
	_, _ = sessions.Peek(entry)
	var m sessions.Message
	if err := json.Unmarshal(entry, &m); err != nil || m.Role == "" {
		return
	}
	entry, _ = json.Marshal(m)
	p, err := sessions.Peek(entry)
	if err != nil {
		t.Fatalf("Peek(%s) = %v; encoding/json reads %+v", entry, err, m)
	}
	unquote := func(raw json.RawMessage) string {
		var s string
		if raw == nil {
			return ""
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("token %s does not decode: %v", raw, err)
		}
		return s
	}
	if p.Role != m.Role || p.Kind != m.Kind || unquote(p.Content) != m.Content || unquote(p.ToolCallID) != m.ToolCallID {
		t.Fatalf("Peek(%s) = %+v; encoding/json reads %+v", entry, p, m)
	}
	if p.HasContent() != (m.Content != "") {
		t.Fatalf("HasContent = %v for %q", p.HasContent(), m.Content)
	}
	var calls []sessions.ToolCall
	for c, rest, ok := sessions.NextCall(p.ToolCalls); ok; c, rest, ok = sessions.NextCall(rest) {
		calls = append(calls, sessions.ToolCall{ID: unquote(c.ID), Name: unquote(c.Name), Arguments: unquote(c.Arguments)})
	}
	if len(calls) != len(m.ToolCalls) {
		t.Fatalf("NextCall found %d calls in %s; want %d", len(calls), entry, len(m.ToolCalls))
	}
	for i := range calls {
		if calls[i] != m.ToolCalls[i] {
			t.Fatalf("call %d = %+v; want %+v", i, calls[i], m.ToolCalls[i])
		}
	}
}

var peekSeeds = []string{
	`{"role":"user","content":"hi"}`,
	`{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"x","arguments":"{\"a\":[1,{\"b\":\"}\"}]}"},{"id":"c2","name":"y","arguments":"{}"}]}`,
	`{"role":"tool","content":"<tool_result>\"quoted\" \\ back</tool_result>","name":"x","tool_call_id":"c1"}`,
	`{"role":"user","content":"skill body","kind":"injection","name":"s"}`,
	`{ "role" : "user" , "content" : "spaced\n" , "extra" : {"nested":[true,false,null,1.5e3]} }`,
	`{"role":"us\u0065r","content":"escaped role"}`,
	`{"role":"user","content":"\u8fd9\u662f"}`,
	`{"role":"assistant","tool_calls":[]}`,
	`{"role":"user","content":null}`,
}

func TestPeekReadsWhatEncodingJSONReads(t *testing.T) {
	t.Parallel()
	for _, s := range peekSeeds {
		checkPeek(t, []byte(s))
	}
	for _, bad := range []string{``, `[]`, `{"role":}`, `{"role":"user"`, `{"content":"no role"}`, `{"role":"user","content":"x}`} {
		if _, err := sessions.Peek([]byte(bad)); err == nil {
			t.Errorf("Peek(%s) succeeded; want ErrNotAMessage", bad)
		}
	}
}

func FuzzPeek(f *testing.F) {
	for _, s := range peekSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, entry []byte) { checkPeek(t, entry) })
}

func TestPeekAllocatesNothingForParleysOwnEntries(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	entry := []byte(`{"role":"assistant","content":"an answer","tool_calls":[{"id":"c1","name":"x","arguments":"{}"}]}`)
	allocs := testing.AllocsPerRun(100, func() {
		p, err := sessions.Peek(entry)
		if err != nil {
			t.Fatal(err)
		}
		for _, rest, ok := sessions.NextCall(p.ToolCalls); ok; _, rest, ok = sessions.NextCall(rest) {
		}
	})
	if allocs != 0 {
		t.Fatalf("Peek and NextCall allocate %v times per entry; want 0", allocs)
	}
}
