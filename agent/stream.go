package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Model answers are asked for as server-sent events ("stream": true), so
// that the text can be shown while it is written and a stalled server is
// noticed between chunks instead of at the end. The chunks are assembled
// into the same response a request without "stream" gets; a server that
// answers JSON anyway is read as such.

// streamFields turn a request body into a streaming one; they are written
// in place of the body's closing brace, and the usage comes in the last
// chunk only when asked for.
const streamFields = `,"stream":true,"stream_options":{"include_usage":true}}`

// DefaultStreamIdleTimeout bounds the silence between two chunks of a
// streamed answer (Config.StreamIdleTimeout).
const DefaultStreamIdleTimeout = 30 * time.Second

// errStreamIdle is a stream that sent nothing for StreamIdleTimeout. It is
// a deadline, retried like one.
var errStreamIdle = fmt.Errorf("agent: the model's stream stalled: %w", context.DeadlineExceeded)

// errStreamCut is a stream that ended before its finish_reason.
var errStreamCut = fmt.Errorf("agent: the model's stream ended before the answer did: %w", io.ErrUnexpectedEOF)

// maxStreamedCalls bounds the tool calls one streamed answer may open: far
// more than any answer runs (config's max_tool_calls_per_answer), and few
// enough that assembling them stays cheap whatever a server sends.
const maxStreamedCalls = 256

// errTooManyCalls is a stream opening more than maxStreamedCalls calls. It
// is not retried, like an oversized answer.
var errTooManyCalls = fmt.Errorf("agent: the model's answer opened more than %d tool calls", maxStreamedCalls)

// sseBufferBytes is the read buffer of a stream; longer lines are
// assembled across reads.
const sseBufferBytes = 16 << 10

// readerPool recycles the read buffers of streams, one per model request.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sseBufferBytes) }}

// sendStream posts body asking for a stream and reads the answer. Each
// piece of text is passed to onText as it arrives (onText may be nil). A
// server that answers one JSON completion instead is read as one; whole
// reports that. idle bounds the wait for each chunk once the response has
// begun.
func (c *Client) sendStream(ctx context.Context, body []byte, idle time.Duration, onText func(string)) (resp openai.ChatCompletionResponse, after time.Duration, whole bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hr, after, err := c.post(ctx, func() io.Reader { return streamBody(body) }, int64(len(body)-1+len(streamFields)), "text/event-stream")
	if err != nil {
		return resp, after, false, err
	}
	defer hr.Body.Close()
	// The idle clock runs from the response's headers: before them only
	// the attempt's deadline applies, as for an answer sent whole.
	timer := time.AfterFunc(idle, func() { cancel(errStreamIdle) })
	defer timer.Stop()
	r := readerPool.Get().(*bufio.Reader)
	limit := &limitedReader{r: hr.Body, left: maxStreamBytes}
	r.Reset(limit)
	defer func() {
		r.Reset(nil) // drops the body
		readerPool.Put(r)
	}()
	if !isEventStream(hr.Header.Get("Content-Type"), r) {
		// An answer sent whole is all answer, no framing: it is held to
		// maxResponseBytes, as one asked for whole is (what was read to
		// tell it from a stream counts), not read on to the stream's cap
		// and buffered by the decoder.
		limit.left -= maxStreamBytes - maxResponseBytes
		resp, err := decodeAnswer(r)
		if err != nil {
			return resp, after, true, streamFailure(ctx, err)
		}
		return resp, after, true, nil
	}
	var s streamReader
	s.init(r)
	for {
		data, err := s.next()
		timer.Reset(idle)
		if err == io.EOF {
			break
		}
		if err != nil {
			return resp, after, false, streamFailure(ctx, err)
		}
		if bytes.Equal(data, doneMarker) {
			break
		}
		if err := s.asm.add(data, onText); err != nil {
			return resp, after, false, err
		}
	}
	resp, err = s.asm.response()
	return resp, after, false, err
}

// streamBody is body with streamFields in place of its closing brace.
func streamBody(body []byte) io.Reader {
	return &streamRequest{head: body[:len(body)-1], tail: streamFields}
}

// streamRequest reads as head followed by tail, without copying them
// into one buffer (io.MultiReader would allocate 32 KiB to copy through).
type streamRequest struct {
	head []byte
	tail string
	off  int
}

func (r *streamRequest) Read(p []byte) (int, error) {
	if r.off < len(r.head) {
		n := copy(p, r.head[r.off:])
		r.off += n
		return n, nil
	}
	i := r.off - len(r.head)
	if i >= len(r.tail) {
		return 0, io.EOF
	}
	n := copy(p, r.tail[i:])
	r.off += n
	return n, nil
}

// WriteTo lets io.Copy hand both parts to w as they are.
func (r *streamRequest) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if r.off < len(r.head) {
		n, err := w.Write(r.head[r.off:])
		r.off += n
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if i := r.off - len(r.head); i < len(r.tail) {
		n, err := io.WriteString(w, r.tail[i:])
		r.off += n
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// streamFailure names why reading a stream failed: the idle clock, the
// attempt's deadline, or err itself.
func streamFailure(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, errResponseTooLarge) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// isEventStream tells a stream from a JSON answer: by its Content-Type,
// else by its first byte (a proxy may drop the header).
func isEventStream(contentType string, r *bufio.Reader) bool {
	ct := strings.ToLower(contentType)
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		return true
	case strings.HasPrefix(ct, "application/json"):
		return false
	}
	for {
		b, err := r.Peek(1)
		if err != nil {
			return false
		}
		if b[0] != ' ' && b[0] != '\n' && b[0] != '\r' && b[0] != '\t' {
			return b[0] != '{'
		}
		_, _ = r.ReadByte()
	}
}

var (
	dataPrefix  = []byte("data:")
	eventPrefix = []byte("event:")
	errorPrefix = []byte("error:")
	doneMarker  = []byte("[DONE]")
)

// streamReader reads the "data:" lines of a server-sent event stream and
// assembles the chunks they carry. Each data line is one chunk, as the
// OpenAI API and its imitators send them; comments (": keep-alive"),
// blank lines and the other fields are skipped. Errors come three ways:
// an error object in a data line (the assembler reads it), the data of an
// "event: error", or an "error:" field.
type streamReader struct {
	r    *bufio.Reader
	line []byte // a line longer than the buffer, assembled
	asm  assembler
	// errorEvent is set from an "event: error" line to the blank line
	// that ends the event.
	errorEvent bool
}

func (s *streamReader) init(r *bufio.Reader) { s.r = r }

// next returns the payload of the next data line, valid until the next
// call, or io.EOF at the end of the body. An error the server sent is
// returned as a *streamError.
func (s *streamReader) next() ([]byte, error) {
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.line = append(s.line[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.r.ReadSlice('\n')
				s.line = append(s.line, line...)
			}
			line = s.line
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if data, ok := bytes.CutPrefix(line, dataPrefix); ok {
			data = bytes.TrimPrefix(data, []byte(" "))
			if s.errorEvent {
				return nil, eventError(data)
			}
			return data, nil
		}
		switch {
		case len(line) == 0:
			s.errorEvent = false
		case bytes.HasPrefix(line, eventPrefix):
			s.errorEvent = string(bytes.TrimSpace(line[len(eventPrefix):])) == "error"
		case bytes.HasPrefix(line, errorPrefix):
			return nil, eventError(bytes.TrimSpace(line[len(errorPrefix):]))
		}
		if err == io.EOF {
			return nil, err
		}
	}
}

// refusesStreaming reports whether a streaming request failed for asking
// to stream: the server does not implement it (501), or it rejected the
// request (400, 422) naming "stream" or "stream_options" as the problem.
// The request is then sent again without them. A rejection that names
// nothing of the kind is the request's own fault and not sent again.
func refusesStreaming(err error) bool {
	code, ok := statusOf(err)
	if !ok {
		return false
	}
	if code == http.StatusNotImplemented {
		return true
	}
	if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		return false
	}
	var said string
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		said = apiErr.Message
		if apiErr.Param != nil {
			said += " " + *apiErr.Param
		}
	case errors.As(err, &reqErr):
		said = string(reqErr.Body)
	}
	return strings.Contains(strings.ToLower(said), "stream")
}
