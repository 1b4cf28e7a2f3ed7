package wecomapp

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// uploadPNG is a 1×1 PNG.
var uploadPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func chartFile() channels.File {
	return channels.File{Name: "chart.png", Type: "image/png", Data: uploadPNG, Caption: "Error rate, last hour"}
}

func memberMsg() channels.Message {
	return channels.Message{Channel: Name, Workspace: testAppName, Chat: "zhangsan", User: "zhangsan", DM: true}
}

// uploader is an adapter of one replica on the shared fake and Redis.
func uploader(t *testing.T, r *redistest.Redis, fake *wechattest.WeComApp, replica string) *Adapter {
	t.Helper()
	a, err := New(Config{Apps: []App{testApp(fake)}}, testOptions(r, replica), metrics.New(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// onlyImage is the one media message delivered, which must be f's image
// to zhangsan, and its caption's count among the text messages.
func onlyImage(t *testing.T, fake *wechattest.WeComApp, f channels.File) (wechattest.MediaMessage, int) {
	t.Helper()
	msgs := fake.MediaMessages()
	if len(msgs) != 1 {
		t.Fatalf("the fake delivered %d media messages (%+v); want one", len(msgs), msgs)
	}
	got := msgs[0]
	if got.ToUser != "zhangsan" || got.MsgType != "image" || got.Kind != "image" || !bytes.Equal(got.Data, f.Data) || got.Name != f.Name {
		t.Errorf("delivered %+v; want %s as an image to zhangsan", got, f.Name)
	}
	captions := 0
	for _, m := range fake.Messages() {
		if m.Content() == f.Caption {
			captions++
		}
	}
	return got, captions
}

// noSecret fails when err shows the app's secret or access token.
func noSecret(t *testing.T, fake *wechattest.WeComApp, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{testSecret, testAESKey, fake.Token()} {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error shows a credential: %v", err)
		}
	}
}

func TestUploadSendsOneImageToTheMemberWithItsCaption(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	a := uploader(t, r, fake, "a")
	id, err := a.Upload(t.Context(), memberMsg(), chartFile(), "d1.file0", false)
	if err != nil {
		t.Fatal(err)
	}
	got, captions := onlyImage(t, fake, chartFile())
	if id == "" || id != got.MsgID || captions != 1 {
		t.Errorf("Upload = %q, delivered %+v with %d captions; want its msgid and the caption once", id, got, captions)
	}
	if up := fake.Uploads(); len(up) != 1 || up[0].Declared != "image/png" {
		t.Errorf("uploads %+v; want the one PNG", up)
	}
	// A GIF is no image to WeCom's media API: it goes as a file.
	gif := channels.File{Name: "anim.gif", Type: "image/gif", Data: []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")}
	if _, err := a.Upload(t.Context(), memberMsg(), gif, "d2.file0", false); err != nil {
		t.Fatal(err)
	}
	if msgs := fake.MediaMessages(); len(msgs) != 2 || msgs[1].MsgType != "file" || msgs[1].Kind != "file" {
		t.Errorf("the GIF was delivered as %+v; want a file message", msgs[1:])
	}
}

// TestUploadFailingOnceAtEachStepSendsOneFile: whichever step fails, and
// whether or not WeCom did it before its answer was lost, the retry — on
// this replica or another — delivers the image and its caption once.
func TestUploadFailingOnceAtEachStepSendsOneFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail func(*wechattest.WeComApp)
	}{
		{"the upload answers 503", func(f *wechattest.WeComApp) {
			f.Fail(wechattest.MediaUploadPath, wechattest.Failure{Status: http.StatusServiceUnavailable})
		}},
		{"the upload takes the bytes and drops the answer", func(f *wechattest.WeComApp) { f.DropAnswer(wechattest.MediaUploadPath, 1) }},
		{"the message answers system busy", func(f *wechattest.WeComApp) {
			f.Fail(wechattest.WeComSendPath, wechattest.Failure{Code: -1, Msg: "system busy"})
		}},
		{"the message is delivered and its answer dropped", func(f *wechattest.WeComApp) { f.DropAnswer(wechattest.WeComSendPath, 1) }},
		{"the caption is delivered and its answer dropped", func(f *wechattest.WeComApp) { f.DropAnswer(wechattest.WeComSendPath, 2) }},
	}
	for _, c := range cases {
		for _, other := range []bool{false, true} {
			name := c.name
			if other {
				name += ", retried by another replica"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := redistest.New(t)
				fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
				first := uploader(t, r, fake, "a")
				c.fail(fake)
				_, err := first.Upload(t.Context(), memberMsg(), chartFile(), "d1.file0", false)
				if again, _ := channels.Retryable(err); err == nil || !again {
					t.Fatalf("Upload = %v; want a failure another try may mend", err)
				}
				noSecret(t, fake, err)
				retry := first
				if other {
					retry = uploader(t, r, fake, "b")
				}
				id, err := retry.Upload(t.Context(), memberMsg(), chartFile(), "d1.file0", true)
				if err != nil {
					t.Fatalf("the retry = %v", err)
				}
				got, captions := onlyImage(t, fake, chartFile())
				if id != got.MsgID || captions != 1 {
					t.Errorf("the retry = %q with %d captions; want the image's msgid %q and one caption", id, captions, got.MsgID)
				}
			})
		}
	}
}

func TestUploadRateLimitedIsRetryable(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	a := uploader(t, r, fake, "a")
	fake.Fail(wechattest.WeComSendPath, wechattest.Failure{Code: 45009, Msg: "api freq out of limit"})
	_, err := a.Upload(t.Context(), memberMsg(), chartFile(), "d1.file0", false)
	var pe *channels.PostError
	if !errors.As(err, &pe) || !pe.Retry {
		t.Fatalf("rate limited: Upload = %#v; want a PostError to retry (WeCom names no delay)", err)
	}
	noSecret(t, fake, err)
}

// TestUploadRefusalsAreFinal: a type or size WeCom refuses, an app that
// is not configured: a final failure, nothing delivered, no credential
// shown.
func TestUploadRefusalsAreFinal(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	a := uploader(t, r, fake, "a")
	huge := channels.File{Name: "big.bin", Type: "application/octet-stream", Data: make([]byte, MaxUploadFile+1)}
	_, err := a.Upload(t.Context(), memberMsg(), huge, "d1.file0", false)
	if again, _ := channels.Retryable(err); err == nil || again {
		t.Errorf("Upload over 20 MB = %v; want a final refusal", err)
	}
	noSecret(t, fake, err)
	elsewhere := memberMsg()
	elsewhere.Workspace = "not-configured"
	if lim := a.FileLimits(elsewhere); lim != (channels.FileLimits{}) {
		t.Errorf("FileLimits of an unknown app = %+v", lim)
	}
	if _, err := a.Upload(t.Context(), elsewhere, chartFile(), "d2.file0", false); err == nil {
		t.Error("Upload for an unknown app succeeded")
	}
	if n := len(fake.MediaMessages()); n != 0 {
		t.Errorf("delivered %d media messages; want none", n)
	}
	if lim := a.FileLimits(memberMsg()); lim.MaxImage != MaxUploadImage || lim.MaxFile != MaxUploadFile {
		t.Errorf("FileLimits = %+v", lim)
	}
}

// TestUploadWithABlankCaptionSendsTheImageAlone: a caption of blanks is
// no caption (and no crash).
func TestUploadWithABlankCaptionSendsTheImageAlone(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	file := chartFile()
	file.Caption = " \n "
	if _, err := uploader(t, r, fake, "a").Upload(t.Context(), memberMsg(), file, "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	if n, texts := len(fake.MediaMessages()), len(fake.Messages())-len(fake.MediaMessages()); n != 1 || texts != 0 {
		t.Errorf("delivered %d images and %d texts; want the image alone", n, texts)
	}
}

// TestUploadToTheAppChat: an app whose answers go to its appchat sends
// its files there too.
func TestUploadToTheAppChat(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	app := testApp(fake)
	app.AppChat = "ops-room"
	a, err := New(Config{Apps: []App{app}}, testOptions(r, "a"), metrics.New(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Upload(t.Context(), memberMsg(), chartFile(), "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	msgs := fake.MediaMessages()
	if len(msgs) != 1 || msgs[0].ChatID != "ops-room" || msgs[0].ToUser != "" || msgs[0].Path != wechattest.WeComAppChatPath {
		t.Errorf("delivered %+v; want the image in the appchat ops-room", msgs)
	}
}
