package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/parleyhq/parley/sessions"
)

// TestAttachmentsAreNumberedPerConversationAndReadBack: files get att_1,
// att_2… within their conversation, another conversation counts on its
// own, and what is read back is what was kept; ids that are not att_N,
// or name nothing, are ErrNoAttachment.
func TestAttachmentsAreNumberedPerConversationAndReadBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, sessions.Options{})
	const conv, other = "slack:T:C:1", "slack:T:C:2"
	data := []byte("\x89PNG\r\n\x1a\n\x00binary\x00")
	a := &sessions.KeptFile{Name: "panel.png", Type: "image/png", Source: "grafana__render_panel", Data: data}
	b := &sessions.KeptFile{Name: "b.csv", Type: "text/csv", Source: "db__query", Data: []byte("a,b\n")}
	c := &sessions.KeptFile{Name: "c.csv", Type: "text/csv", Source: "db__query", Data: []byte("c\n")}
	for _, k := range []struct {
		conv string
		f    *sessions.KeptFile
		want string
	}{{conv, a, "att_1"}, {conv, b, "att_2"}, {other, c, "att_1"}} {
		id, err := s.KeepAttachment(ctx, k.conv, k.f)
		if err != nil || id != k.want || k.f.ID != k.want {
			t.Fatalf("KeepAttachment(%s) = %q, %v; want %s", k.f.Name, id, err, k.want)
		}
	}
	got, err := s.Attachment(ctx, conv, "att_1")
	if err != nil || !bytes.Equal(got.Data, data) || got.Type != "image/png" || got.Source != "grafana__render_panel" || got.Size != int64(len(data)) {
		t.Fatalf("Attachment = %+v, %v", got, err)
	}
	info, err := s.AttachmentInfo(ctx, other, "att_1")
	if err != nil || info.Name != "c.csv" || info.Data != nil || info.Size != 2 {
		t.Fatalf("AttachmentInfo = %+v, %v", info, err)
	}
	for _, id := range []string{"att_3", "att_", "att_1x", "1", "../att_1", "att_-1", ""} {
		if _, err := s.Attachment(ctx, conv, id); !errors.Is(err, sessions.ErrNoAttachment) {
			t.Errorf("Attachment(%q) = %v; want ErrNoAttachment", id, err)
		}
	}
}
