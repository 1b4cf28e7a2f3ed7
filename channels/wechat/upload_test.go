package wechat

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// uploadPNG is a 1×1 PNG.
var uploadPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func chartFile() channels.File {
	return channels.File{Name: "chart.png", Type: "image/png", Data: uploadPNG, Caption: "Error rate, last hour"}
}

// ilinkUploads is an iLink bot logged in on a fake, with a fake CDN, and
// a replica's adapter for it.
type ilinkUploads struct {
	r     *redistest.Redis
	ilink *wechattest.ILink
	cdn   *wechattest.Media
}

func newILinkUploads(t *testing.T) *ilinkUploads {
	t.Helper()
	u := &ilinkUploads{r: redistest.New(t), ilink: wechattest.NewILink(t), cdn: wechattest.NewMedia(t)}
	return u
}

func (u *ilinkUploads) adapter(t *testing.T, replica string) *Adapter {
	t.Helper()
	st := NewRedisState(u.r.Client, u.r.Prefix)
	loggedIn(t, st, u.ilink)
	cfg := testConfig(u.r, replica)
	cfg.Options.State = st
	cfg.Config.ILinkCDNURL = u.cdn.CDNURL()
	a, err := cfg.new()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (u *ilinkUploads) msg() channels.Message {
	return channels.Message{Channel: Name, Workspace: u.ilink.BotID, Chat: "u-1", Meta: map[string]string{"via": ViaILink, "context_token": "ctx-1"}}
}

// delivered is what reached u-1: the images (decrypted from the CDN with
// the key each message names) and the texts.
func (u *ilinkUploads) delivered(t *testing.T) (images [][]byte, texts []string) {
	t.Helper()
	for _, s := range sendsTo(u.ilink, "u-1") {
		if s.Status != 0 || s.Ret != 0 {
			continue
		}
		for _, img := range s.Images {
			plain, err := decryptECB(u.cdn.CDNFile(img.Param), img.AESKey)
			if err != nil {
				t.Fatalf("image %s does not decrypt with its key: %v", img.Param, err)
			}
			images = append(images, plain)
		}
		if s.Text != "" {
			texts = append(texts, s.Text)
		}
	}
	return images, texts
}

func noBotToken(t *testing.T, u *ilinkUploads, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), u.ilink.Token()) {
		t.Errorf("the error shows the bot token: %v", err)
	}
}

func TestUploadSendsOneImageOverILinkWithItsCaption(t *testing.T) {
	t.Parallel()
	u := newILinkUploads(t)
	a := u.adapter(t, "a")
	id, err := a.Upload(t.Context(), u.msg(), chartFile(), "d1.file0", false)
	if err != nil {
		t.Fatal(err)
	}
	images, texts := u.delivered(t)
	if len(images) != 1 || !bytes.Equal(images[0], uploadPNG) || len(texts) != 1 || texts[0] != "Error rate, last hour" {
		t.Fatalf("delivered %d images and texts %q; want the PNG, then its caption", len(images), texts)
	}
	sends := sendsTo(u.ilink, "u-1")
	if id == "" || sends[0].ClientID != id || sends[0].ContextToken != "ctx-1" {
		t.Errorf("Upload = %q; the image message %+v; want its client_id and the user's context token", id, sends[0])
	}
	sum := md5.Sum(uploadPNG)
	if reqs := u.ilink.UploadRequests(); len(reqs) != 1 || reqs[0].MediaType != 1 || reqs[0].To != "u-1" ||
		reqs[0].RawSize != len(uploadPNG) || reqs[0].RawMD5 != hex.EncodeToString(sum[:]) || reqs[0].FileSize%16 != 0 {
		t.Errorf("getuploadurl calls %+v; want one for the image, with its sizes and MD5", reqs)
	}
}

// TestUploadOverILinkFailingOnceAtEachStepSendsOneImage: a step that
// fails with an answer, or a CDN upload that took the bytes and dropped
// the answer, is retried (by this replica or another) without repeating
// a message that was sent.
func TestUploadOverILinkFailingOnceAtEachStepSendsOneImage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail func(*ilinkUploads)
	}{
		{"the CDN answers 503", func(u *ilinkUploads) { u.cdn.FailCDNUpload(http.StatusServiceUnavailable) }},
		{"the CDN takes the bytes and drops the answer", func(u *ilinkUploads) { u.cdn.FailCDNUpload(-1) }},
		{"the image message answers 503", func(u *ilinkUploads) { u.ilink.ScriptSendStatus(http.StatusServiceUnavailable) }},
		{"the caption answers 502", func(u *ilinkUploads) { u.ilink.ScriptSendStatus(0, http.StatusBadGateway) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := newILinkUploads(t)
			c.fail(u)
			_, err := u.adapter(t, "a").Upload(t.Context(), u.msg(), chartFile(), "d1.file0", false)
			if again, _ := channels.Retryable(err); err == nil || !again {
				t.Fatalf("Upload = %v; want a failure another try may mend", err)
			}
			noBotToken(t, u, err)
			if _, err := u.adapter(t, "b").Upload(t.Context(), u.msg(), chartFile(), "d1.file0", true); err != nil {
				t.Fatalf("the retry on another replica = %v", err)
			}
			images, texts := u.delivered(t)
			if len(images) != 1 || len(texts) != 1 {
				t.Errorf("delivered %d images and %d captions; want one of each", len(images), len(texts))
			}
		})
	}
}

// TestUploadOverILinkRefusesAnUploadURLOffTheCDN: whatever getuploadurl
// answers, the image goes to the configured CDN only.
func TestUploadOverILinkRefusesAnUploadURLOffTheCDN(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(elsewhere.Close)
	u := newILinkUploads(t)
	a := u.adapter(t, "a")
	for _, forged := range []string{elsewhere.URL + "/c2c/upload?sig=forged", "https://novac2c.cdn.weixin.qq.com.evil.example/c2c/upload?sig=forged",
		strings.Replace(u.cdn.CDNURL(), "http://", "http://user:forged@", 1) + "/upload"} {
		u.ilink.ForgeUploadURL(forged)
		_, err := a.Upload(t.Context(), u.msg(), chartFile(), "d-"+forged, false)
		if again, _ := channels.Retryable(err); err == nil || again {
			t.Errorf("Upload given upload_full_url %q = %v; want a final refusal", forged, err)
		}
		if err != nil && strings.Contains(err.Error(), "forged") {
			t.Errorf("the refusal shows the URL: %v", err)
		}
		noBotToken(t, u, err)
	}
	if hits.Load() != 0 || u.cdn.CDNUploads() != 0 || len(u.ilink.Sends()) != 0 {
		t.Errorf("%d requests elsewhere, %d CDN uploads, %d messages; want nothing sent", hits.Load(), u.cdn.CDNUploads(), len(u.ilink.Sends()))
	}
}

// TestUploadLimitsByTransport: iLink takes images; a WeCom AI bot has no
// way to send a file; a file that is no image is refused over iLink.
func TestUploadLimitsByTransport(t *testing.T) {
	t.Parallel()
	u := newILinkUploads(t)
	a := u.adapter(t, "a")
	if lim := a.FileLimits(u.msg()); lim.MaxImage != MaxILinkImage || lim.MaxFile != 0 {
		t.Errorf("FileLimits over iLink = %+v", lim)
	}
	wecom := channels.Message{Channel: Name, Chat: "c", Meta: map[string]string{"via": ViaWeCom}}
	if lim := a.FileLimits(wecom); lim != (channels.FileLimits{}) {
		t.Errorf("FileLimits over a WeCom AI bot = %+v; want none", lim)
	}
	for _, c := range []struct {
		m channels.Message
		f channels.File
	}{
		{wecom, chartFile()},
		{u.msg(), channels.File{Name: "errors.csv", Type: "text/csv", Data: []byte("t,v\n")}},
	} {
		if _, err := a.Upload(t.Context(), c.m, c.f, "d1", false); err == nil {
			t.Errorf("Upload of %s via %s succeeded", c.f.Name, c.m.Meta["via"])
		} else if again, _ := channels.Retryable(err); again {
			t.Errorf("Upload of %s via %s = %v; want a final refusal", c.f.Name, c.m.Meta["via"], err)
		}
	}
	if len(u.ilink.Sends()) != 0 {
		t.Error("a refused file sent a message")
	}
	// A rate limit is worth another try.
	u.ilink.ScriptSendStatus(http.StatusTooManyRequests)
	_, err := a.Upload(t.Context(), u.msg(), chartFile(), "d2", false)
	if again, _ := channels.Retryable(err); !again {
		t.Errorf("Upload rate limited = %v; want a failure to retry", err)
	}
}

// TestUploadOverILinkWithABlankCaptionSendsTheImageAlone: a caption of
// blanks is no caption.
func TestUploadOverILinkWithABlankCaptionSendsTheImageAlone(t *testing.T) {
	t.Parallel()
	u := newILinkUploads(t)
	file := chartFile()
	file.Caption = "  \t"
	if _, err := u.adapter(t, "a").Upload(t.Context(), u.msg(), file, "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	if images, texts := u.delivered(t); len(images) != 1 || len(texts) != 0 {
		t.Errorf("delivered %d images and texts %q; want the image alone", len(images), texts)
	}
}
