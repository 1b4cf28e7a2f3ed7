package channels_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// endless yields bytes forever and counts them: a 100 MB upload that
// never ends.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}
func (e *endless) Close() error { return nil }

func TestCapBodyStopsAtTheLimit(t *testing.T) {
	src := &endless{}
	b, err := io.ReadAll(channels.CapBody(src, 1000))
	if !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Fatalf("err = %v, want ErrAttachmentTooLarge", err)
	}
	if len(b) != 1000 {
		t.Errorf("read %d bytes before failing, want 1000", len(b))
	}
	if src.n > 1001+512 { // io.ReadAll's buffer may ask for more; the cap asks the source for at most one byte past
		t.Errorf("the source was read for %d bytes, past the limit", src.n)
	}
}

func TestCapBodyExactAndUnder(t *testing.T) {
	for _, n := range []int{0, 999, 1000} {
		data := bytes.Repeat([]byte("a"), n)
		b, err := io.ReadAll(channels.CapBody(io.NopCloser(bytes.NewReader(data)), 1000))
		if err != nil || !bytes.Equal(b, data) {
			t.Errorf("%d bytes: got %d bytes, err %v", n, len(b), err)
		}
	}
}

func TestHTTPStatusError(t *testing.T) {
	for _, tc := range []struct {
		code int
		want error
	}{
		{200, nil}, {401, channels.ErrAttachmentForbidden}, {403, channels.ErrAttachmentForbidden},
		{404, channels.ErrAttachmentNotFound}, {410, channels.ErrAttachmentNotFound},
	} {
		err := channels.HTTPStatusError(tc.code)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%d: %v, want %v", tc.code, err, tc.want)
		}
	}
	err := channels.HTTPStatusError(500)
	if err == nil || errors.Is(err, channels.ErrAttachmentForbidden) || errors.Is(err, channels.ErrAttachmentNotFound) || errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("500: %v, want a plain failure", err)
	}
}

func TestAttachmentsSurviveJSON(t *testing.T) {
	m := channels.Message{Channel: "slack", Text: "", Attachments: []channels.Attachment{{
		Kind: channels.AttachmentImage, ID: "F1", Name: "a.png", MIME: "image/png", Size: 42,
		Meta: map[string]string{"url": "https://files.slack.com/a.png"},
	}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back channels.Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Attachments) != 1 || back.Attachments[0].Meta["url"] != m.Attachments[0].Meta["url"] || back.Attachments[0].Size != 42 {
		t.Errorf("round trip: %+v", back.Attachments)
	}
}
