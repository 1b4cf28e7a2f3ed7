package officialaccount

import (
	"bytes"
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

func userMsg() channels.Message {
	return channels.Message{Channel: Name, Workspace: testAppID, Chat: "o-user", User: "o-user", DM: true}
}

func oaUploader(t *testing.T, r *redistest.Redis, fake *wechattest.OfficialAccount, replica string) *Adapter {
	t.Helper()
	a, err := New(testConfig(fake, testAESKey), testOptions(r, replica), metrics.New(), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// delivered is the image messages and captions the fake delivered.
func delivered(fake *wechattest.OfficialAccount, caption string) (images []wechattest.MediaMessage, captions int) {
	for _, m := range fake.CustomMessages() {
		if m.MsgType == "text" && m.Text.Content == caption {
			captions++
		}
	}
	return fake.MediaMessages(), captions
}

func noOASecret(t *testing.T, fake *wechattest.OfficialAccount, err error) {
	t.Helper()
	for _, s := range []string{testSecret, testAESKey, fake.Token()} {
		if err != nil && s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error shows a credential: %v", err)
		}
	}
}

func TestUploadSendsOneImageToTheUserWithItsCaption(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	a := oaUploader(t, r, fake, "a")
	if _, err := a.Upload(t.Context(), userMsg(), chartFile(), "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	images, captions := delivered(fake, chartFile().Caption)
	if len(images) != 1 || images[0].ToUser != "o-user" || images[0].MsgType != "image" || !bytes.Equal(images[0].Data, uploadPNG) || captions != 1 {
		t.Errorf("delivered %+v and %d captions; want the PNG to o-user, then its caption", images, captions)
	}
	if lim := a.FileLimits(userMsg()); lim.MaxImage != MaxUploadImage || lim.MaxFile != 0 {
		t.Errorf("FileLimits = %+v; want images only", lim)
	}
	// Any other file is refused for good, before anything is uploaded.
	csv := channels.File{Name: "errors.csv", Type: "text/csv", Data: []byte("t,v\n1,2\n")}
	if _, err := a.Upload(t.Context(), userMsg(), csv, "d2.file0", false); err == nil {
		t.Error("Upload of a CSV succeeded")
	} else if again, _ := channels.Retryable(err); again {
		t.Errorf("Upload of a CSV = %v; want a final refusal", err)
	}
	if n := len(fake.Uploads()); n != 1 {
		t.Errorf("%d uploads; want the PNG's only", n)
	}
}

// TestUploadFailingOnceAtEachStepSendsOneImage: a failure with an answer
// (a 503, system busy) is retried, by this replica or another, without
// repeating what was done; a message whose answer was lost is final, so
// the image never arrives twice.
func TestUploadFailingOnceAtEachStepSendsOneImage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fail  func(*wechattest.OfficialAccount)
		final bool // the failure is not retried: the message may have landed
	}{
		{"the upload answers 503", func(f *wechattest.OfficialAccount) {
			f.Fail(wechattest.MediaUploadPath, wechattest.Failure{Status: http.StatusServiceUnavailable})
		}, false},
		{"the upload takes the bytes and drops the answer", func(f *wechattest.OfficialAccount) { f.DropAnswer(wechattest.MediaUploadPath, 1) }, false},
		{"the image message answers system busy", func(f *wechattest.OfficialAccount) {
			f.Fail(wechattest.OACustomPath, wechattest.Failure{Code: -1, Msg: "system busy"})
		}, false},
		{"the caption answers 503", func(f *wechattest.OfficialAccount) {
			f.Fail(wechattest.OACustomPath, wechattest.Failure{Pass: true}, wechattest.Failure{Status: http.StatusServiceUnavailable})
		}, false},
		{"the image message is sent and its answer dropped", func(f *wechattest.OfficialAccount) { f.DropAnswer(wechattest.OACustomPath, 1) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := redistest.New(t)
			fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
			c.fail(fake)
			_, err := oaUploader(t, r, fake, "a").Upload(t.Context(), userMsg(), chartFile(), "d1.file0", false)
			noOASecret(t, fake, err)
			again, _ := channels.Retryable(err)
			if err == nil || again == c.final {
				t.Fatalf("Upload = %v (retry %v); want a failure, retried: %v", err, again, !c.final)
			}
			if !c.final {
				if _, err := oaUploader(t, r, fake, "b").Upload(t.Context(), userMsg(), chartFile(), "d1.file0", true); err != nil {
					t.Fatalf("the retry on another replica = %v", err)
				}
			}
			images, captions := delivered(fake, chartFile().Caption)
			if len(images) != 1 || captions > 1 || !c.final && captions != 1 {
				t.Errorf("delivered %d images and %d captions; want the image once (and its caption once when retried)", len(images), captions)
			}
		})
	}
}

func TestUploadIntoAClosedWindowIsFinal(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	fake.CloseWindow("o-user", true)
	_, err := oaUploader(t, r, fake, "a").Upload(t.Context(), userMsg(), chartFile(), "d1.file0", false)
	if again, _ := channels.Retryable(err); err == nil || again {
		t.Errorf("Upload into a closed window = %v; want a final failure", err)
	}
	noOASecret(t, fake, err)
	if n := len(fake.MediaMessages()); n != 0 {
		t.Errorf("%d images delivered", n)
	}
}

// TestUploadWithABlankCaptionSendsTheImageAlone: a caption of blanks is
// no caption (and no crash).
func TestUploadWithABlankCaptionSendsTheImageAlone(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	file := chartFile()
	file.Caption = "\t "
	if _, err := oaUploader(t, r, fake, "a").Upload(t.Context(), userMsg(), file, "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	if n, texts := len(fake.MediaMessages()), len(fake.CustomMessages())-len(fake.MediaMessages()); n != 1 || texts != 0 {
		t.Errorf("delivered %d images and %d texts; want the image alone", n, texts)
	}
}
