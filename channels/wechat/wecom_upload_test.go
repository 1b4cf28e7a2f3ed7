package wechat

import (
	"bytes"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// wecomUploader is a running adapter holding the fake AI bot's
// connection, and the message of a group it answers.
func wecomUploader(t *testing.T) (*Adapter, *wechattest.WeCom, channels.Message, *redistest.Redis) {
	t.Helper()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-files", "s3cret")
	cfg := wecomConfig(r, f, "A")
	// Chunks of half a megabyte keep the fake busy for longer than the
	// tests' usual 100 ms heartbeat allows under the race detector.
	cfg.Options.PingInterval = 5 * time.Second
	rn := start(t, r, cfg, nil)
	waitFor(t, "the connection", func() bool { return rn.ch.wecom.current() != nil })
	m := channels.Message{Channel: Name, Workspace: f.BotID, Chat: "grp-9", Meta: map[string]string{"via": ViaWeCom, "chatid": "grp-9", "req_id": "req-1"}}
	return rn.ch, f, m, r
}

// captions are the markdown messages pushed with content.
func captions(f *wechattest.WeCom, content string) int {
	n := 0
	for _, fr := range f.Frames("aibot_send_msg") {
		if _, c := fr.Markdown(); c == content && fr.ErrCode == 0 {
			n++
		}
	}
	return n
}

func TestUploadSendsOneImageOverAWeComAIBotWithItsCaption(t *testing.T) {
	t.Parallel()
	a, f, m, _ := wecomUploader(t)
	if _, err := a.Upload(t.Context(), m, chartFile(), "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	sent := f.MediaSent()
	if len(sent) != 1 || sent[0].ChatID != "grp-9" || sent[0].MsgType != "image" || !bytes.Equal(sent[0].Data, uploadPNG) || captions(f, chartFile().Caption) != 1 {
		t.Fatalf("sent %+v, %d captions; want the PNG as an image in grp-9, then its caption", sent, captions(f, chartFile().Caption))
	}
	// A file over one chunk goes up in several and arrives whole.
	big := channels.File{Name: "errors.csv", Type: "text/csv", Data: bytes.Repeat([]byte("t,v\n1,2\n"), 150_000)}
	if _, err := a.Upload(t.Context(), m, big, "d2.file0", false); err != nil {
		t.Fatal(err)
	}
	if sent := f.MediaSent(); len(sent) != 2 || sent[1].MsgType != "file" || !bytes.Equal(sent[1].Data, big.Data) || sent[1].Filename != "errors.csv" {
		t.Errorf("the CSV arrived as %d bytes of %q (%s); want it whole, as a file", len(sent[len(sent)-1].Data), sent[len(sent)-1].Filename, sent[len(sent)-1].MsgType)
	}
	if n := len(f.Frames(cmdUploadChunk)); n != 1+3 {
		t.Errorf("%d chunks; want 1 for the PNG and 3 for 1.2 MB", n)
	}
	if lim := a.FileLimits(m); lim.MaxImage != MaxWeComImage || lim.MaxFile != MaxWeComFile {
		t.Errorf("FileLimits over WeCom = %+v", lim)
	}
}

// TestUploadOverAWeComAIBotFailingOnceAtEachStepSendsOneImage: WeCom
// busy at any step is retried without repeating a message that was sent.
func TestUploadOverAWeComAIBotFailingOnceAtEachStepSendsOneImage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, cmd string
		skip      int // frames of cmd that pass first
	}{
		{"init", cmdUploadInit, 0}, {"a chunk", cmdUploadChunk, 0}, {"finish", cmdUploadFinish, 0},
		{"the image message", cmdSend, 0}, {"the caption", cmdSend, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, f, m, _ := wecomUploader(t)
			f.FailUploadFrames(c.cmd, append(make([]int, c.skip), -1)...)
			_, err := a.Upload(t.Context(), m, chartFile(), "d1.file0", false)
			if again, _ := channels.Retryable(err); err == nil || !again {
				t.Fatalf("Upload with %s busy = %v; want a failure another try may mend", c.name, err)
			}
			if _, err := a.Upload(t.Context(), m, chartFile(), "d1.file0", true); err != nil {
				t.Fatalf("the retry = %v", err)
			}
			if n, k := len(f.MediaSent()), captions(f, chartFile().Caption); n != 1 || k != 1 {
				t.Errorf("sent %d images and %d captions; want one of each", n, k)
			}
		})
	}
}

// TestUploadOverAWeComAIBotNeedsTheConnection: a replica without it
// sends nothing and says another try may land where it is.
func TestUploadOverAWeComAIBotNeedsTheConnection(t *testing.T) {
	t.Parallel()
	_, f, m, r := wecomUploader(t)
	other, err := wecomConfig(r, f, "B").new()
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Upload(t.Context(), m, chartFile(), "d1.file0", false)
	if again, _ := channels.Retryable(err); err == nil || !again {
		t.Errorf("Upload without the connection = %v; want a failure another try may mend", err)
	}
	if len(f.MediaSent()) != 0 || len(f.Frames(cmdUploadInit)) != 0 {
		t.Error("a replica without the connection sent something")
	}
}
