package feishu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// pngBytes is the start of a PNG (what a screenshot is) and some body.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7, 1, 3}, 1000)...)

// An image, a file and a post with images are handed over with their
// attachments and without the note; a sticker still gets the note.
func TestFeishuMediaMessagesCarryAttachments(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	dm := func(id, typ, content string) feishutest.Message {
		return feishutest.Message{MessageID: id, ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_a", MsgType: typ, Content: content}
	}
	f.mustPost(t, dm("om_img", "image", feishutest.ImageContent("img_v3_a")))
	f.mustPost(t, dm("om_file", "file", feishutest.FileContent("file_v3_b", "app.log")))
	f.mustPost(t, dm("om_post", "post", feishutest.PostContent("", "what is wrong here?", "img_v3_c", "img_v3_d", "img_v3_c")))
	f.mustPost(t, dm("om_sticker", "sticker", `{"file_key":"file_s"}`))
	msgs := f.rec.messages()
	if len(msgs) != 4 {
		t.Fatalf("submitted %d messages: %+v", len(msgs), msgs)
	}
	img, file, post, sticker := msgs[0], msgs[1], msgs[2], msgs[3]
	if img.Unsupported != "" || img.Text != "" || len(img.Attachments) != 1 ||
		img.Attachments[0].Kind != channels.AttachmentImage || img.Attachments[0].ID != "img_v3_a" || img.Attachments[0].Meta[AttachMessageID] != "om_img" {
		t.Errorf("image message: %+v", img)
	}
	if file.Unsupported != "" || len(file.Attachments) != 1 || file.Attachments[0].Kind != channels.AttachmentFile ||
		file.Attachments[0].ID != "file_v3_b" || file.Attachments[0].Name != "app.log" || file.Attachments[0].Meta[AttachMessageID] != "om_file" {
		t.Errorf("file message: %+v", file)
	}
	if !strings.HasPrefix(post.Text, "what is wrong here?") || post.Unsupported != "" || len(post.Attachments) != 2 ||
		post.Attachments[0].ID != "img_v3_c" || post.Attachments[1].ID != "img_v3_d" {
		t.Errorf("post message: text %q, attachments %+v", post.Text, post.Attachments)
	}
	if sticker.Unsupported != UnsupportedNote || len(sticker.Attachments) != 0 {
		t.Errorf("sticker message: %+v", sticker)
	}
}

func TestPostImageKeysLocaleWrapped(t *testing.T) {
	t.Parallel()
	got := postImageKeys(`{"zh_cn":{"title":"t","content":[[{"tag":"img","image_key":"img_1"},{"tag":"text","text":"x"}]]}}`)
	if len(got) != 1 || got[0] != "img_1" {
		t.Fatalf("postImageKeys = %v", got)
	}
	for _, bad := range []string{``, `[]`, `{"content":"x"}`, `{"zh_cn":1}`} {
		if got := postImageKeys(bad); len(got) != 0 {
			t.Errorf("postImageKeys(%q) = %v", bad, got)
		}
	}
}

func fetchAll(t *testing.T, f *fixture, att channels.Attachment, limit int64) ([]byte, error) {
	t.Helper()
	rc, err := f.ch.FetchAttachment(context.Background(), channels.Message{Channel: Name, Chat: "oc_dm"}, att, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func imageAtt(messageID, key string) channels.Attachment {
	return channels.Attachment{Kind: channels.AttachmentImage, ID: key, Meta: map[string]string{AttachMessageID: messageID}}
}

// The download returns exactly the resource's bytes, asks for the right
// type, and carries the tenant token (the fake refuses without it).
func TestFeishuFetchAttachmentExactBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.AddResource("om_1", "img_v3_a", pngBytes, "image/png")
	log := append([]byte("2026-11-30 ERROR boom\n"), bytes.Repeat([]byte("line\n"), 100)...)
	f.api.AddResource("om_1", "file_v3_b", log, "")
	got, err := fetchAll(t, f, imageAtt("om_1", "img_v3_a"), 1<<20)
	if err != nil || !bytes.Equal(got, pngBytes) {
		t.Fatalf("image: %d bytes, %v", len(got), err)
	}
	got, err = fetchAll(t, f, channels.Attachment{Kind: channels.AttachmentFile, ID: "file_v3_b", Name: "app.log", Meta: map[string]string{AttachMessageID: "om_1"}}, 1<<20)
	if err != nil || !bytes.Equal(got, log) {
		t.Fatalf("file: %d bytes, %v", len(got), err)
	}
	if types := f.api.ResourceTypes(); len(types) != 2 || types[0] != "image" || types[1] != "file" {
		t.Errorf("type parameters %v", types)
	}
	// Exactly at the limit is fine.
	if got, err := fetchAll(t, f, imageAtt("om_1", "img_v3_a"), int64(len(pngBytes))); err != nil || len(got) != len(pngBytes) {
		t.Errorf("at the limit: %d bytes, %v", len(got), err)
	}
	// Corrupt bytes are delivered as they are: the gateway sniffs them.
	f.api.AddResource("om_1", "img_bad", []byte("not an image at all"), "image/png")
	if got, err := fetchAll(t, f, imageAtt("om_1", "img_bad"), 1<<20); err != nil || string(got) != "not an image at all" {
		t.Errorf("corrupt: %q, %v", got, err)
	}
}

// Bad downloads: each fails as the gateway tells them apart, without
// reading past the limit and without the token in the error.
func TestFeishuFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.AddResource("om_1", "img_small", pngBytes, "image/png")
	f.api.AddResourceBehaviour("om_1", "img_403", feishutest.ResourceForbidden)
	f.api.AddResourceBehaviour("om_1", "img_huge", feishutest.ResourceHuge)
	f.api.AddResourceBehaviour("om_1", "img_endless", feishutest.ResourceEndless)
	const limit = 256 << 10

	var errs []error
	_, err := fetchAll(t, f, imageAtt("om_1", "img_403"), limit)
	errs = append(errs, err)
	if !errors.Is(err, channels.ErrAttachmentForbidden) {
		t.Errorf("403: %v", err)
	}
	// Over the limit by one byte.
	if _, err := fetchAll(t, f, imageAtt("om_1", "img_small"), int64(len(pngBytes)-1)); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
	before := f.api.ResourceBytesServed()
	if _, err := f.ch.FetchAttachment(context.Background(), channels.Message{}, imageAtt("om_1", "img_huge"), limit); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("announced 1 GiB: %v", err)
	}
	_, err = fetchAll(t, f, imageAtt("om_1", "img_endless"), limit)
	if !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("endless: %v", err)
	}
	// What was written is bounded by the limit plus the connection's
	// buffers, never the stream (which would go on forever).
	if served := f.api.ResourceBytesServed() - before; served > 16<<20 {
		t.Errorf("%d bytes served for two refused downloads", served)
	}
	// Unknown key: the platform's refusal, not a hang.
	_, err = fetchAll(t, f, imageAtt("om_1", "img_gone"), limit)
	errs = append(errs, err)
	if err == nil {
		t.Error("unknown resource fetched")
	}
	// A redirect off the Open API's host is not followed.
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); _, _ = w.Write(pngBytes) }))
	defer other.Close()
	f.api.AddResourceRedirect("om_1", "img_moved", other.URL+"/x.png")
	if _, err := fetchAll(t, f, imageAtt("om_1", "img_moved"), limit); err == nil || hits.Load() != 0 {
		t.Errorf("redirect off the host: %v, %d requests there", err, hits.Load())
	}
	reqs := f.api.ResourceRequests()
	// Forged ids never become a request.
	for _, att := range []channels.Attachment{
		imageAtt("om_1", "../../bot/v3/info"),
		imageAtt("om_1/resources/x", "img_small"),
		imageAtt("", "img_small"),
		{Kind: channels.AttachmentImage, ID: "img_small"},
		imageAtt("om_1", "img?type=file"),
	} {
		if _, err := fetchAll(t, f, att, limit); err == nil {
			t.Errorf("forged attachment %+v fetched", att)
		}
	}
	if got := f.api.ResourceRequests(); got != reqs {
		t.Errorf("forged attachments made %d requests", got-reqs)
	}
	for _, e := range errs {
		if e != nil && strings.Contains(e.Error(), "t-fake-tenant-token") {
			t.Errorf("token in error: %v", e)
		}
	}
}
