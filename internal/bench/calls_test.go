package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPerAnswer(t *testing.T) {
	t.Parallel()
	before := map[string]int64{"auth.test": 1, "chat.postMessage": 2, "conversations.replies": 2}
	after := map[string]int64{"auth.test": 1, "chat.postMessage": 12, "conversations.replies": 7, "chat.startStream": 5}
	got := perAnswer(before, after, 10)
	want := map[string]float64{"chat.postMessage": 1, "conversations.replies": 0.5, "chat.startStream": 0.5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("perAnswer = %v, want %v", got, want)
	}
	if got := perAnswer(before, after, 0); len(got) != 0 {
		t.Fatalf("no answers: %v", got)
	}
	all, reading := CallsResult{PerAnswer: want}.Total()
	if all != 2 || reading != 0.5 {
		t.Fatalf("Total = %v, %v; want 2, 0.5", all, reading)
	}
}

func TestPrintCalls(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}
	rs := []CallsResult{
		{Model: "instant", Messages: 2, E2E: ds, PerAnswer: map[string]float64{"chat.postMessage": 1, "conversations.replies": 1}},
		{Model: "streamed", Messages: 2, E2E: ds, Lost: 1, PerAnswer: map[string]float64{"chat.startStream": 1, "chat.appendStream": 3,
			"chat.stopStream": 1, "conversations.replies": 1, "zz.other": 0.5}},
	}
	if got, want := sortedMethods(rs), []string{"chat.postMessage", "chat.startStream", "chat.appendStream", "chat.stopStream",
		"conversations.replies", "zz.other"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sortedMethods = %v, want %v", got, want)
	}
	var out bytes.Buffer
	printCalls(&out, "Slack", rs)
	for _, want := range []string{
		"Slack API calls per answer (2 messages a model",
		"instant   streamed",
		"chat.postMessage                       1.00       0.00",
		"chat.appendStream                      0.00       3.00",
		"total                                  2.00       6.50",
		"showing the answer                   1.00       5.50",
		"reading the room                     1.00       1.00",
		"e2e p99", "20.0 ms", "0 / 0      1 / 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printCalls lacks %q:\n%s", want, out.String())
		}
	}
}

func TestIndexStats(t *testing.T) {
	t.Parallel()
	d := func(x int) time.Duration { return time.Duration(x) * time.Millisecond }
	lat := [][]time.Duration{{d(3), d(1), d(2)}, {d(1000), 0, d(900)}, {0, 0, 0}}
	got := indexStats(lat)
	want := []IndexStat{{P50: d(2), P99: d(3), Answered: 3}, {P50: d(900), P99: d(1000), Answered: 2}, {}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("indexStats = %v, want %v", got, want)
	}
	var out bytes.Buffer
	printThread(&out, ThreadResult{Threads: 3, PerThread: 3, Lat: lat})
	flat := strings.Join(strings.Fields(out.String()), " ") // the columns' widths aside
	for _, want := range []string{"3 threads at once", "3 messages each", "1 2.0 ms 3.0 ms 3/3",
		"2 900.0 ms 1000.0 ms 2/3", "3 0.0 ms 0.0 ms 0/3"} {
		if !strings.Contains(flat, want) {
			t.Errorf("printThread lacks %q:\n%s", want, out.String())
		}
	}
}

func chatBody(stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": "hello bench-7."}}})
	return string(b)
}

// TestStreamedModelStreams reads the streamed model as OpenAI's wire
// format: the pieces as chat.completion.chunk events spread over the
// time, the finish, the usage, [DONE]; and the whole completion to a
// request that does not ask for a stream.
func TestStreamedModelStreams(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(streamedModel(5, 200*time.Millisecond))
	defer srv.Close()
	start := time.Now()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var text strings.Builder
	var at []time.Duration
	finish, usage, done := "", false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Object  string
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct{ TotalTokens int } `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %q: %v", line, err)
		}
		if c.Usage != nil {
			usage = true
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				at = append(at, time.Since(start))
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if want := "echo: hello bench-7. word1 word2 word3 word4"; text.String() != want {
		t.Fatalf("streamed %q, want %q", text.String(), want)
	}
	if finish != "stop" || !usage || !done {
		t.Fatalf("finish %q, usage %v, [DONE] %v", finish, usage, done)
	}
	if len(at) != 5 || at[4] < 150*time.Millisecond || at[0] > 100*time.Millisecond {
		t.Fatalf("pieces at %v: want 5 spread over 200 ms", at)
	}
	resp2, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var whole struct {
		Object  string
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp2.Body).Decode(&whole); err != nil || whole.Object != "chat.completion" || len(whole.Choices) != 1 ||
		whole.Choices[0].Message.Content != text.String() {
		t.Fatalf("whole answer %+v: %v", whole, err)
	}
}

// TestFakeSlackStreams drives the fake Slack's streaming methods as
// parley does: the answer is recorded when its stream stops, and every
// call is counted by method.
func TestFakeSlackStreams(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack()
	srv := httptest.NewServer(fs)
	defer srv.Close()
	call := func(method string, p url.Values) map[string]any {
		t.Helper()
		p.Set("token", botToken)
		resp, err := http.PostForm(srv.URL+"/api/"+method, p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	wait := fs.expect(3)
	if m := call("chat.startStream", url.Values{"channel": {"C1"}, "thread_ts": {"1.1"}}); m["ok"] != false || m["error"] != "invalid_arguments" {
		t.Fatalf("startStream without recipients: %v", m)
	}
	m := call("chat.startStream", url.Values{"channel": {"C1"}, "thread_ts": {"1.1"}, "recipient_user_id": {"U1"},
		"recipient_team_id": {teamID}, "markdown_text": {"echo: bench-3."}})
	ts, _ := m["ts"].(string)
	if m["ok"] != true || ts == "" {
		t.Fatalf("startStream: %v", m)
	}
	if m := call("chat.appendStream", url.Values{"channel": {"C1"}, "ts": {ts}, "markdown_text": {" more"}}); m["ok"] != true || m["ts"] != ts {
		t.Fatalf("appendStream: %v", m)
	}
	select {
	case <-wait:
		t.Fatal("answered before the stream stopped")
	default:
	}
	if m := call("chat.stopStream", url.Values{"channel": {"C1"}, "ts": {ts}}); m["ok"] != true {
		t.Fatalf("stopStream: %v", m)
	}
	if m := call("chat.appendStream", url.Values{"channel": {"C1"}, "ts": {ts}, "markdown_text": {"late"}}); m["error"] != "message_not_in_streaming_state" {
		t.Fatalf("appendStream after stop: %v", m)
	}
	for _, method := range []string{"assistant.threads.setStatus", "chat.update"} {
		if m := call(method, url.Values{"channel": {"C1"}, "channel_id": {"C1"}, "thread_ts": {"1.1"}, "ts": {ts}, "text": {"x"}}); m["ok"] != true {
			t.Fatalf("%s: %v", method, m)
		}
	}
	select {
	case a := <-wait:
		if a.channel != "C1" || a.thread != "1.1" {
			t.Fatalf("answer %+v", a)
		}
	default:
		t.Fatal("the stopped stream is not the answer")
	}
	want := map[string]int64{"chat.startStream": 2, "chat.appendStream": 2, "chat.stopStream": 1, "assistant.threads.setStatus": 1, "chat.update": 1}
	if got := fs.methodCounts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls by method %v, want %v", got, want)
	}
}

func TestFeishuOp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ method, path, want string }{
		{"POST", "/open-apis/im/v1/messages/om_bench000001/reply", "POST im/v1/messages/:id/reply"},
		{"POST", "/open-apis/im/v1/messages", "POST im/v1/messages"},
		{"PUT", "/open-apis/cardkit/v1/cards/7355372766134157313/elements/answer/content", "PUT cardkit/v1/cards/:id/elements/answer/content"},
		{"PATCH", "/open-apis/cardkit/v1/cards/card1/settings", "PATCH cardkit/v1/cards/:id/settings"},
		{"DELETE", "/open-apis/im/v1/messages/om_x/reactions/r1", "DELETE im/v1/messages/:id/reactions/:id"},
		{"POST", "/open-apis/auth/v3/tenant_access_token/internal", "POST auth/v3/tenant_access_token/internal"},
		{"GET", "/open-apis/contact/v3/users/ou_abc", "GET contact/v3/users/:id"},
	} {
		if got := feishuOp(tt.method, tt.path); got != tt.want {
			t.Errorf("feishuOp(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
	if !feishuReading("GET im/v1/messages") || feishuReading("POST im/v1/messages/:id/reply") {
		t.Error("feishuReading: GETs read, the rest show")
	}
}
