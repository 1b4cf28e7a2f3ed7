package slack

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// uploadPNG is a 1×1 PNG.
var uploadPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func chartFile() channels.File {
	return channels.File{Name: "chart.png", Type: "image/png", Data: uploadPNG, Caption: "Error rate, **last hour**"}
}

// onlyUpload is the one file the fake shared, which must be f in the
// thread of threadMsg.
func onlyUpload(t *testing.T, fake *slacktest.Server, f channels.File) slacktest.Upload {
	t.Helper()
	ups := fake.Uploads()
	if len(ups) != 1 {
		t.Fatalf("the fake shared %d files (%+v); want one", len(ups), ups)
	}
	u := ups[0]
	if u.Channel != "C1" || u.ThreadTS != "100.1" || u.Type != "image/png" || !bytes.Equal(u.Data, f.Data) || u.Title != f.Name {
		t.Errorf("shared %+v; want %s as an image in C1's thread 100.1 titled %q", u, f.Name, f.Name)
	}
	return u
}

// noToken fails when err shows the bot token.
func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), slacktest.BotToken) {
		t.Errorf("the error shows the bot token: %v", err)
	}
}

func TestUploadSharesOneImageInTheThreadWithItsCaption(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
	if err != nil {
		t.Fatal(err)
	}
	u := onlyUpload(t, f.slack, chartFile())
	if id != u.FileID || u.Comment != "Error rate, *last hour*" {
		t.Errorf("Upload = %q, shared %+v; want the file's id and the caption in mrkdwn", id, u)
	}
	if u.Name == "chart.png" || !strings.HasSuffix(u.Name, ".png") || !strings.HasPrefix(u.Name, "chart.") {
		t.Errorf("uploaded as %q; want chart.png tagged with its key before the extension", u.Name)
	}
	if n := f.slack.Count("files.upload"); n != 0 {
		t.Errorf("files.upload (retired) called %d times", n)
	}

	// Outside a thread (a DM), the file goes to the top level.
	dm := channels.Message{Channel: Name, Chat: "D1", DM: true, Meta: map[string]string{MetaTS: "5.5"}}
	if _, err := f.a.Upload(t.Context(), dm, chartFile(), "d2.file0", false); err != nil {
		t.Fatal(err)
	}
	if ups := f.slack.Uploads(); len(ups) != 2 || ups[1].Channel != "D1" || ups[1].ThreadTS != "" {
		t.Errorf("DM upload %+v; want it at D1's top level", ups[1:])
	}
}

// TestUploadFailingOnceAtEachStepSendsOneFile: whichever step fails, the
// failure is one Retry can mend, and the retry (told the first may have
// reached Slack) leaves one file in the thread.
func TestUploadFailingOnceAtEachStepSendsOneFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, step string
		fail       slacktest.Failure
	}{
		{"getUploadURLExternal answers 503", "files.getUploadURLExternal", slacktest.Failure{Status: 503}},
		{"the byte upload answers 503", slacktest.UploadStep, slacktest.Failure{Status: 503}},
		{"the byte upload takes the bytes, then 502", slacktest.UploadStep, slacktest.Failure{Written: true, Status: 502}},
		{"completeUploadExternal answers 503", "files.completeUploadExternal", slacktest.Failure{Status: 503}},
		{"completeUploadExternal shares, then 500", "files.completeUploadExternal", slacktest.Failure{Written: true, Status: 500}},
		{"completeUploadExternal answers internal_error", "files.completeUploadExternal", slacktest.Failure{Error: "internal_error"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.slack.Fail(c.step, c.fail)
			_, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
			if again, _ := channels.Retryable(err); err == nil || !again {
				t.Fatalf("Upload with %s = %v; want a failure another try may mend", c.name, err)
			}
			noToken(t, err)
			id, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", true)
			if err != nil {
				t.Fatalf("the retry = %v", err)
			}
			if u := onlyUpload(t, f.slack, chartFile()); id != u.FileID {
				t.Errorf("the retry gave %q; want the shared file's %q", id, u.FileID)
			}
		})
	}
}

// TestUploadThatTimedOutAfterSlackSharedItIsFoundNotSentTwice: Slack
// shares the file and its answer never comes; the try told so finds the
// file in the thread by its tagged name and shares nothing more.
func TestUploadThatTimedOutAfterSlackSharedItIsFoundNotSentTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.slack.Fail("files.completeUploadExternal", slacktest.Failure{Written: true, Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := f.a.Upload(ctx, threadMsg(), chartFile(), "d1.file0", false)
		done <- err
	}()
	// The caller gives up once Slack has shared the file: its answer is
	// what was lost.
	slacktest.WaitFor(t, "the share", 20*time.Second, func() bool { return len(f.slack.Uploads()) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Upload whose answer never came succeeded")
	}
	id, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", true)
	if err != nil {
		t.Fatal(err)
	}
	u := onlyUpload(t, f.slack, chartFile())
	if id != u.FileID {
		t.Errorf("Upload again = %q; want the file shared by the first try, %q", id, u.FileID)
	}
	if n := f.slack.Count("files.getUploadURLExternal"); n != 1 {
		t.Errorf("files.getUploadURLExternal called %d times; want the first try's only", n)
	}
	// Another file of the thread (another key) is no earlier try of it.
	other := chartFile()
	if _, err := f.a.Upload(t.Context(), threadMsg(), other, "d1.file1", true); err != nil {
		t.Fatal(err)
	}
	if n := len(f.slack.Uploads()); n != 2 {
		t.Errorf("after a second file, the thread holds %d; want 2", n)
	}
}

// TestUploadRefusesAnUploadURLOffSlacksFileHost: the bytes go nowhere but
// Slack's file host, whatever the API answers; the refusal is final and
// shows neither the token nor the URL.
func TestUploadRefusesAnUploadURLOffSlacksFileHost(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(elsewhere.Close)
	for _, forged := range []string{
		elsewhere.URL + "/upload/v1/F1?sig=forged-signature",
		"https://files.slack.com.evil.example/upload/v1/F1?sig=forged-signature",
		"http://files.slack.com/upload/v1/F1?sig=forged-signature",
		"https://user:forged-signature@files.slack.com/upload/v1/F1",
		"::not a url forged-signature",
	} {
		f := newFixture(t, nil)
		f.slack.ForgeUploadURL(forged)
		_, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
		if again, _ := channels.Retryable(err); err == nil || again {
			t.Errorf("Upload given upload_url %q = %v; want a final refusal", forged, err)
			continue
		}
		noToken(t, err)
		if strings.Contains(err.Error(), "forged-signature") {
			t.Errorf("the refusal shows the URL: %v", err)
		}
		if n := f.slack.Count("files.completeUploadExternal"); n != 0 || len(f.slack.Uploads()) != 0 {
			t.Errorf("upload_url %q: completed %d times; want nothing shared", forged, n)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the foreign host got %d requests; want none", hits.Load())
	}
}

func TestUploadRateLimitedIsRetriedAfterSlacksDelay(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"files.getUploadURLExternal", slacktest.UploadStep, "files.completeUploadExternal"} {
		f := newFixture(t, nil)
		f.slack.Fail(step, slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "7"})
		_, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
		var pe *channels.PostError
		if !errors.As(err, &pe) || !pe.Retry || pe.After != 7*time.Second {
			t.Errorf("%s rate limited: Upload = %#v; want a PostError to retry after 7s", step, err)
		}
		noToken(t, err)
		if f.apiErrors("ratelimited") != 1 {
			t.Errorf("%s rate limited: counted %v; want 1", step, f.apiErrors("ratelimited"))
		}
	}
}

func TestUploadRefusedForGoodIsFinal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.slack.Fail("files.getUploadURLExternal", slacktest.Failure{Error: "file_uploads_disabled"})
	_, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
	if again, _ := channels.Retryable(err); err == nil || again || !strings.Contains(err.Error(), "file_uploads_disabled") {
		t.Errorf("Upload refused by the workspace = %v; want a final failure naming Slack's code", err)
	}
	f.slack.Fail("files.getUploadURLExternal", slacktest.Failure{Error: "invalid_auth"})
	_, err = f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", false)
	noToken(t, err)
	if again, _ := channels.Retryable(err); err == nil || again {
		t.Errorf("Upload with a refused token = %v; want a final failure", err)
	}
}

func TestUploadLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if lim := f.a.FileLimits(threadMsg()); lim.MaxImage != MaxUploadImage || lim.MaxFile != MaxUploadFile {
		t.Errorf("FileLimits of a thread = %+v", lim)
	}
	slash := channels.Message{Channel: Name, Chat: "C1", Thread: "slash:U1", Meta: map[string]string{MetaResponseURL: f.slack.ResponseURL("r1")}}
	if lim := f.a.FileLimits(slash); lim != (channels.FileLimits{}) {
		t.Errorf("FileLimits of a slash command's answer = %+v; want none (ephemeral answers take no file)", lim)
	}
	if _, err := f.a.Upload(t.Context(), slash, chartFile(), "d1.file0", false); err == nil || len(f.slack.Uploads()) != 0 {
		t.Errorf("Upload into a slash command's answer = %v, %d files; want it refused", err, len(f.slack.Uploads()))
	}
}

// TestUploadLookRefusedStillSends: a workspace without the history scope
// cannot be read back; the file is sent (a copy is better than none),
// but a look that fails for a reason that may pass sends nothing yet.
func TestUploadLookRefusedStillSends(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.slack.Fail("conversations.replies", slacktest.Failure{Status: 503})
	if _, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", true); err == nil || len(f.slack.Uploads()) != 0 {
		t.Fatalf("Upload whose look failed with 503 = %v, %d files; want a failure and nothing sent", err, len(f.slack.Uploads()))
	}
	f.slack.Refuse("conversations.replies", "missing_scope")
	if _, err := f.a.Upload(t.Context(), threadMsg(), chartFile(), "d1.file0", true); err != nil {
		t.Fatal(err)
	}
	onlyUpload(t, f.slack, chartFile())
}

// TestUploadWithABlankCaptionSharesTheFileAlone: a caption of blanks is
// no caption (and no crash).
func TestUploadWithABlankCaptionSharesTheFileAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	file := chartFile()
	file.Caption = " \n\t "
	if _, err := f.a.Upload(t.Context(), threadMsg(), file, "d1.file0", false); err != nil {
		t.Fatal(err)
	}
	if u := onlyUpload(t, f.slack, file); u.Comment != "" {
		t.Errorf("initial_comment %q; want none", u.Comment)
	}
}
