package officialaccount

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
)

var photo = append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF"), bytes.Repeat([]byte{5, 6, 7}, 700)...)

// An image message is handed over with its MediaId as an attachment, not
// the note; FetchAttachment downloads exactly its bytes with the
// account's token, and refuses a download over the limit or a 403.
func TestImageMessageFetchedThroughMediaGet(t *testing.T) {
	c := newCluster(t, testAESKey)
	rp := c.replica(t, "a", nil)
	c.fake.AddMedia("MEDIA_OA", photo, "image/jpeg")
	c.fake.AddMediaBehaviour("DENIED", wechattest.MediaForbidden)
	c.fake.AddMediaBehaviour("ENDLESS", wechattest.MediaEndless)
	in := wechattest.Inbound{To: testOriginal, From: "u1", MsgType: "image", PicURL: "https://mmbiz.qpic.cn/x", MediaID: "MEDIA_OA", MsgID: "21"}
	wechattest.Post(t, rp.url(), c.platform.Encrypted(t, in, true))
	waitFor(t, "the message", func() bool { return len(c.gw.messages()) == 1 })
	m := c.gw.messages()[0]
	if m.Unsupported != "" || len(m.Attachments) != 1 || m.Attachments[0].ID != "MEDIA_OA" || m.Attachments[0].Kind != channels.AttachmentImage {
		t.Fatalf("handed over %+v", m)
	}
	fetch := func(id string, limit int64) ([]byte, error) {
		rc, err := rp.ch.FetchAttachment(context.Background(), m, channels.Attachment{Kind: channels.AttachmentImage, ID: id}, limit)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	if got, err := fetch("MEDIA_OA", 1<<20); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("downloaded %d bytes, %v", len(got), err)
	}
	if _, err := fetch("DENIED", 1<<20); !errors.Is(err, channels.ErrAttachmentForbidden) {
		t.Errorf("403: %v", err)
	}
	if _, err := fetch("ENDLESS", 64<<10); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("endless: %v", err)
	}
	if _, err := rp.ch.FetchAttachment(context.Background(), channels.Message{Workspace: "wx-other"}, m.Attachments[0], 1<<20); err == nil {
		t.Error("fetched for another account")
	}
}
