package wecomapp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

var photo = append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF"), bytes.Repeat([]byte{1, 2, 3, 4}, 500)...)

// An image message is handed over with its MediaId as an attachment (no
// note), and FetchAttachment downloads exactly its bytes with the app's
// token; a stale token is renewed on the way.
func TestImageMessageFetchedThroughMediaGet(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	rp := startReplica(t, r, Config{Apps: []App{testApp(fake)}}, testOptions(r, "a"))
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	fake.AddMedia("MEDIA_1", photo, "image/jpeg")

	in := wechattest.Inbound{To: testCorp, AgentID: strconv.Itoa(testAgent), From: "u1", MsgType: "image",
		PicURL: "https://wework.qpic.cn/x", MediaID: "MEDIA_1", MsgID: "10"}
	if a := wechattest.Post(t, rp.url(), platform.Encrypted(t, in, false)); a.Status != http.StatusOK {
		t.Fatalf("callback answered %d", a.Status)
	}
	waitFor(t, "the message", func() bool { return len(rp.gw.messages()) == 1 })
	m := rp.gw.messages()[0]
	if m.Unsupported != "" || len(m.Attachments) != 1 || m.Attachments[0].ID != "MEDIA_1" || m.Attachments[0].Kind != channels.AttachmentImage {
		t.Fatalf("handed over %+v", m)
	}
	ctx := context.Background()
	for range 2 {
		rc, err := rp.ch.FetchAttachment(ctx, m, m.Attachments[0], 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, photo) {
			t.Fatalf("downloaded %d bytes, %v", len(got), err)
		}
		fake.ExpireToken() // the second download renews it
	}
	if n := len(fake.TokenCalls()); n != 2 {
		t.Errorf("%d token fetches; want 2", n)
	}
}

func TestMediaGetRefusals(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	rp := startReplica(t, r, Config{Apps: []App{testApp(fake)}}, testOptions(r, "a"))
	fake.AddMedia("SMALL", photo, "image/jpeg")
	fake.AddMediaBehaviour("DENIED", wechattest.MediaForbidden)
	fake.AddMediaBehaviour("HUGE", wechattest.MediaHuge)
	fake.AddMediaBehaviour("ENDLESS", wechattest.MediaEndless)
	m := channels.Message{Channel: Name, Workspace: testAppName, Chat: "u1"}
	fetch := func(id string, limit int64) error {
		rc, err := rp.ch.FetchAttachment(context.Background(), m, channels.Attachment{Kind: channels.AttachmentImage, ID: id}, limit)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		return err
	}
	const limit = 128 << 10
	for _, c := range []struct {
		id   string
		want error
	}{
		{"DENIED", channels.ErrAttachmentForbidden},
		{"HUGE", channels.ErrAttachmentTooLarge},
		{"ENDLESS", channels.ErrAttachmentTooLarge},
		{"GONE", channels.ErrAttachmentNotFound},
	} {
		err := fetch(c.id, limit)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.id, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), fake.Token()) {
			t.Errorf("%s: the access token is in the error: %v", c.id, err)
		}
	}
	if err := fetch("SMALL", int64(len(photo)-1)); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
	if served := fake.MediaBytesServed(); served > 16<<20 {
		t.Errorf("%d bytes served", served)
	}
	// A redirect off the API's host is not followed.
	elsewhere := wechattest.NewMedia(t)
	fake.AddMediaRedirect("MOVED", elsewhere.Add("/p.jpg", photo, "image/jpeg"))
	if err := fetch("MOVED", limit); err == nil || elsewhere.Requests() != 0 {
		t.Errorf("redirect off the host: %v, %d requests there", err, elsewhere.Requests())
	}
	// Another app's conversation, or no media id: no request.
	calls := fake.MediaCalls()
	if _, err := rp.ch.FetchAttachment(context.Background(), channels.Message{Workspace: "other"}, channels.Attachment{ID: "SMALL"}, limit); err == nil {
		t.Error("fetched for an unknown app")
	}
	if _, err := rp.ch.FetchAttachment(context.Background(), m, channels.Attachment{}, limit); err == nil {
		t.Error("fetched without a media id")
	}
	if fake.MediaCalls() != calls {
		t.Error("a refused fetch made a request")
	}
}
