package feishu

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// uploadPNG is a 1×1 PNG.
var uploadPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func chartFile() channels.File {
	return channels.File{Name: "chart.png", Type: "image/png", Data: uploadPNG, Caption: "Error rate, last hour"}
}

func reportFile() channels.File {
	return channels.File{Name: "report.pdf", Type: "application/pdf", Data: []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n%%EOF\n"),
		Caption: "The weekly report"}
}

// onlyFile is the one image or file message the fake accepted, which
// must be in the thread of groupMsg with f's bytes.
func onlyFile(t *testing.T, fake *feishutest.Server, f channels.File) feishutest.File {
	t.Helper()
	files := fake.Files()
	if len(files) != 1 {
		t.Fatalf("the fake took %d file messages (%+v); want one", len(files), files)
	}
	got := files[0]
	if got.Kind != "reply" || got.ReplyTo != "om_q" || !got.ReplyInThread || !bytes.Equal(got.Data, f.Data) {
		t.Errorf("file message %+v; want %s as a reply in the thread of om_q", got.Sent, f.Name)
	}
	return got
}

// noSecrets fails when err shows the app's credentials.
func noSecrets(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{"secret", "t-cli_", testKey, testToken} {
		if err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("the error shows a credential (%q): %v", s, err)
		}
	}
}

func TestUploadSendsOneImageInTheThreadWithItsCaption(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, err := f.ch.Upload(t.Context(), groupMsg(), chartFile(), "d1.file0", false)
	if err != nil {
		t.Fatal(err)
	}
	got := onlyFile(t, f.api, chartFile())
	if got.MessageID != id || got.MsgType != "post" || got.Caption != "Error rate, last hour" || got.Type != "image/png" {
		t.Errorf("Upload = %q, sent %+v; want one post of the image and its caption", id, got)
	}
	if n := len(f.api.Sent()); n != 1 {
		t.Errorf("sent %d messages; want the one", n)
	}

	// Without a caption, an image message; in a direct chat, to the chat.
	dm := channels.Message{ID: "om_d", Channel: Name, Chat: "oc_dm", DM: true, Meta: map[string]string{MetaMessageID: "om_d", MetaChatType: "p2p"}}
	plain := chartFile()
	plain.Caption = ""
	if _, err := f.ch.Upload(t.Context(), dm, plain, "d2.file0", false); err != nil {
		t.Fatal(err)
	}
	if files := f.api.Files(); len(files) != 2 || files[1].MsgType != "image" || files[1].Kind != "create" || files[1].ChatID != "oc_dm" {
		t.Errorf("the DM image %+v; want an image message created in oc_dm", files[1:])
	}
}

func TestUploadSendsAFileAndThenItsCaption(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, err := f.ch.Upload(t.Context(), groupMsg(), reportFile(), "d1.file0", false)
	if err != nil {
		t.Fatal(err)
	}
	got := onlyFile(t, f.api, reportFile())
	if got.MessageID != id || got.MsgType != "file" || got.FileType != "pdf" || got.Name != "report.pdf" {
		t.Errorf("Upload = %q, sent %+v; want a pdf file message named report.pdf", id, got)
	}
	sent := f.api.Sent()
	if len(sent) != 2 || sent[1].MsgType != "text" || sent[1].Text != "The weekly report" || sent[1].ReplyTo != "om_q" || !sent[1].ReplyInThread {
		t.Errorf("sent %+v; want the file, then its caption in the same thread", sent)
	}
	// A file of a type Feishu does not preview, and an image type its
	// image API does not take, go as downloads.
	for _, file := range []channels.File{
		{Name: "errors.csv", Type: "text/csv", Data: []byte("t,v\n1,2\n")},
		{Name: "graph.svg", Type: "image/svg+xml", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
	} {
		if _, err := f.ch.Upload(t.Context(), groupMsg(), file, "d-"+file.Name, false); err != nil {
			t.Fatal(err)
		}
	}
	if files := f.api.Files(); len(files) != 3 || files[1].FileType != "stream" || files[2].FileType != "stream" || files[2].MsgType != "file" {
		t.Errorf("files %+v; want the csv and the svg as stream files", files)
	}
}

// TestUploadFailingOnceAtEachStepSendsOneFile: whichever step fails, and
// whether or not the platform did it before the answer was lost, the
// retry leaves one file message (and one caption) in the thread.
func TestUploadFailingOnceAtEachStepSendsOneFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		file channels.File
		fail func(*feishutest.Server)
	}{
		{"the image upload answers 503", chartFile(), func(s *feishutest.Server) {
			s.Fail("image_upload", feishutest.Failure{Status: 503, Code: 1000004})
		}},
		{"the image upload takes the bytes and drops the answer", chartFile(), func(s *feishutest.Server) { s.DropAnswer("image_upload", 1) }},
		{"the message answers 500", chartFile(), func(s *feishutest.Server) { s.Fail("reply", feishutest.Failure{Status: 500, Code: 1000005}) }},
		{"the message is sent and its answer dropped", chartFile(), func(s *feishutest.Server) { s.DropAnswer("reply", 1) }},
		{"the file upload takes the bytes and drops the answer", reportFile(), func(s *feishutest.Server) { s.DropAnswer("file_upload", 1) }},
		{"the file message is sent and its answer dropped", reportFile(), func(s *feishutest.Server) { s.DropAnswer("reply", 1) }},
		{"the caption is sent and its answer dropped", reportFile(), func(s *feishutest.Server) { s.DropAnswer("reply", 2) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			c.fail(f.api)
			_, err := f.ch.Upload(t.Context(), groupMsg(), c.file, "d1.file0", false)
			if again, _ := channels.Retryable(err); err == nil || !again {
				t.Fatalf("Upload = %v; want a failure another try may mend", err)
			}
			noSecrets(t, err)
			id, err := f.ch.Upload(t.Context(), groupMsg(), c.file, "d1.file0", true)
			if err != nil {
				t.Fatalf("the retry = %v", err)
			}
			if got := onlyFile(t, f.api, c.file); got.MessageID != id {
				t.Errorf("the retry gave %q; want the file message's %q", id, got.MessageID)
			}
			if c.file.Caption != "" && c.file.Type != "image/png" {
				if n := len(f.api.Sent()); n != 2 {
					t.Errorf("sent %d messages; want the file and its caption once each", n)
				}
			}
		})
	}
}

func TestUploadRateLimitedIsRetriedAfterFeishusDelay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.Fail("image_upload", feishutest.Failure{Status: http.StatusTooManyRequests, Code: 99991400, Msg: "request trigger frequency limit", Reset: "9"})
	_, err := f.ch.Upload(t.Context(), groupMsg(), chartFile(), "d1.file0", false)
	var pe *channels.PostError
	if !errors.As(err, &pe) || !pe.Retry || pe.After != 9*time.Second {
		t.Fatalf("rate limited: Upload = %#v; want a PostError to retry after 9s", err)
	}
	noSecrets(t, err)
	if len(f.api.Files()) != 0 {
		t.Error("a rate-limited upload sent a message")
	}
}

// TestUploadRefusalsAreFinal: a file Feishu refuses (too large for its
// limit, as a gateway that skipped FileLimits would send) or a revoked
// permission fails for good, revealing no credential.
func TestUploadRefusalsAreFinal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	huge := channels.File{Name: "huge.png", Type: "image/png", Data: append(bytes.Clone(uploadPNG), make([]byte, MaxUploadImage)...)}
	_, err := f.ch.Upload(t.Context(), groupMsg(), huge, "d1.file0", false)
	if again, _ := channels.Retryable(err); err == nil || again {
		t.Errorf("Upload of an image over 10 MiB = %v; want a final refusal", err)
	}
	noSecrets(t, err)
	f.api.Fail("file_upload", feishutest.Failure{Status: 400, Code: 99991672, Msg: "Access denied. One of the following scopes is required: [im:resource]"})
	_, err = f.ch.Upload(t.Context(), groupMsg(), reportFile(), "d2.file0", false)
	if again, _ := channels.Retryable(err); err == nil || again {
		t.Errorf("Upload without the permission = %v; want a final refusal", err)
	}
	noSecrets(t, err)
	if len(f.api.Sent()) != 0 {
		t.Errorf("sent %+v; want nothing", f.api.Sent())
	}
	if lim := f.ch.FileLimits(groupMsg()); lim.MaxImage != 10<<20 || lim.MaxFile != 30<<20 {
		t.Errorf("FileLimits = %+v; want Feishu's 10 and 30 MiB", lim)
	}
}

// TestUploadWithABlankCaptionSendsTheFileAlone: a caption of blanks is no
// caption: an image message, a file without a text after it.
func TestUploadWithABlankCaptionSendsTheFileAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for i, file := range []channels.File{chartFile(), reportFile()} {
		file.Caption = " \n "
		if _, err := f.ch.Upload(t.Context(), groupMsg(), file, "d"+string(rune('0'+i)), false); err != nil {
			t.Fatal(err)
		}
	}
	if sent := f.api.Sent(); len(sent) != 2 || sent[0].MsgType != "image" || sent[1].MsgType != "file" {
		t.Errorf("sent %+v; want an image message and a file message, no caption", sent)
	}
}
