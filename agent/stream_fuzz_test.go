package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readStream runs the stream reader and assembler over body as
// sendStream does, returning the text pieces passed on.
func readStream(body []byte) (pieces string, msg string, err error) {
	var s streamReader
	s.init(bufio.NewReaderSize(bytes.NewReader(body), sseBufferBytes))
	var b strings.Builder
	for {
		data, err := s.next()
		if err != nil || bytes.Equal(data, doneMarker) {
			break
		}
		if err := s.asm.add(data, func(t string) { b.WriteString(t) }); err != nil {
			return b.String(), "", err
		}
	}
	resp, err := s.asm.response()
	if err != nil {
		return b.String(), "", err
	}
	return b.String(), resp.Choices[0].Message.Content, nil
}

// FuzzStreamAssembly: whatever a server streams, reading it never panics,
// and an answer assembled from it holds exactly the text passed on as it
// came, so what a channel showed is what is stored.
func FuzzStreamAssembly(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n",
		": ping\r\nevent: error\r\ndata: {\"error\":{\"message\":\"boom\"}}\r\n\r\n",
		"data: {\"choices\":[{\"index\":-1,\"delta\":{\"content\":null}}],\"usage\":{\"prompt_tokens\":-5}}\n",
		"data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\u00e9\\ud83d\"},\"finish_reason\":\"length\"}]}",
		"data: [DONE]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pieces, content, err := readStream(body)
		if err == nil && content != pieces {
			t.Fatalf("assembled %q, but passed on %q", content, pieces)
		}
	})
}

// TestStreamLinesLongerThanTheBuffer: a chunk longer than the read buffer
// is read whole.
func TestStreamLinesLongerThanTheBuffer(t *testing.T) {
	long := strings.Repeat("0123456789", 5*sseBufferBytes/10)
	body := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", long)
	pieces, content, err := readStream([]byte(body))
	if err != nil || content != long || pieces != long {
		t.Fatalf("read %d bytes (%d passed on), %v; want %d", len(content), len(pieces), err, len(long))
	}
}

// TestStreamOpeningTooManyCallsFails: a stream opening calls without end
// is refused at maxStreamedCalls, and not asked for again.
func TestStreamOpeningTooManyCallsFails(t *testing.T) {
	var b strings.Builder
	for i := range maxStreamedCalls + 1 {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"c%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n", i, i)
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n")
	srv := sse(t, b.String())
	_, _, _, err := NewClient(srv.URL, "k", nil).sendStream(context.Background(), []byte(`{}`), time.Minute, nil)
	if err != errTooManyCalls || retryable(err) {
		t.Fatalf("sendStream = %v (retryable %v), want errTooManyCalls, not retried", err, retryable(err))
	}
}

// TestStreamBodyReads: the streaming request body reads (byte by byte, or
// copied whole) as the body with the stream fields in its last brace.
func TestStreamBodyReads(t *testing.T) {
	body := []byte(`{"model":"m","messages":[]}`)
	want := `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`
	one, err := io.ReadAll(iotest.OneByteReader(streamBody(body)))
	if err != nil || string(one) != want {
		t.Fatalf("read byte by byte: %q, %v", one, err)
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, streamBody(body)); err != nil || b.String() != want {
		t.Fatalf("copied: %q, %v", b.String(), err)
	}
	if err := iotest.TestReader(streamBody(body), []byte(want)); err != nil {
		t.Fatal(err)
	}
}
