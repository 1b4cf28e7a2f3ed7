package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

func noisePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	rand.New(rand.NewSource(int64(w * h))).Read(img.Pix)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imagesOf returns the decoded image_url parts and the text of the last
// user message of req.
func imagesOf(t *testing.T, req openai.ChatCompletionRequest) (string, [][]byte) {
	t.Helper()
	var text string
	var out [][]byte
	for _, m := range req.Messages {
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		text, out = m.Content, nil
		for _, p := range m.MultiContent {
			if p.Type == openai.ChatMessagePartTypeText {
				text += p.Text
				continue
			}
			_, b64, ok := strings.Cut(p.ImageURL.URL, ";base64,")
			b, err := base64.StdEncoding.DecodeString(b64)
			if !ok || err != nil {
				t.Fatalf("image_url is not a data URL: %.60s", p.ImageURL.URL)
			}
			out = append(out, b)
		}
	}
	return text, out
}

// waitPostContaining waits for a post in channel/thread containing text.
func waitPostContaining(t *testing.T, fake *slacktest.Server, channel, thread string, text ...string) string {
	t.Helper()
	var got string
	slacktest.WaitFor(t, strings.Join(text, ", "), slackDeadline, func() bool {
	posts:
		for _, p := range fake.Posts() {
			if p.Channel != channel || p.ThreadTS != thread {
				continue
			}
			for _, s := range text {
				if !strings.Contains(p.Text, s) {
					continue posts
				}
			}
			got = p.Text
			return true
		}
		return false
	})
	return got
}

func TestSlackScreenshotReachesAVisionModel(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServeWith(t, r, model, fake, "model:\n  vision: true\n")
	shot := noisePNG(t, 120, 80)
	file := fake.File("F0SHOT", "dashboard.png", "image/png", shot)
	model.Script(openaitest.Text("The error rate spiked at 14:02."))

	const root = "1700000100.000100"
	srv.event(t, slacktest.Event("EvImg1", slacktest.WithFiles(slacktest.Mention("C1", "U1", root, "", "what happened here?"), file)), 0)
	waitPost(t, fake, "C1", root, "The error rate spiked at 14:02.")

	text, imgs := imagesOf(t, model.Requests()[0])
	if len(imgs) != 1 || !bytes.Equal(imgs[0], shot) {
		t.Fatalf("the model got %d images; want the screenshot's exact bytes", len(imgs))
	}
	if !strings.Contains(text, "what happened here?") || !strings.Contains(text, "dashboard.png, image/png, 120x80") {
		t.Errorf("user text = %q", text)
	}
	// The history in Redis holds the reference, not the bytes.
	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	raw, err := r.Client.LRange(context.Background(), store.Key("slack:"+slacktest.TeamID+":C1:"+root, "history"), 0, -1).Result()
	if err != nil || len(raw) == 0 {
		t.Fatalf("history: %v (%d entries)", err, len(raw))
	}
	b64 := base64.StdEncoding.EncodeToString(shot)
	for _, e := range raw {
		if strings.Contains(e, b64[:80]) || len(e) > 4096 {
			t.Errorf("a stored entry holds the image (%d bytes)", len(e))
		}
	}
	if !strings.Contains(raw[0], `"sha256":"`) || !strings.Contains(raw[0], `"id":"F0SHOT"`) {
		t.Errorf("stored user message lacks the reference: %.400s", raw[0])
	}
	if got := srv.metric(t, `parley_attachments_total{channel="slack",kind="image",outcome="ok"}`); got != "1" {
		t.Errorf("parley_attachments_total ok = %q", got)
	}
}

func TestSlackBadFilesAreNotedAndTheMessageStillAnswered(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServeWith(t, r, model, fake, "model:\n  vision: true\nmedia:\n  max_download_bytes: 1048576\n")
	png := noisePNG(t, 10, 10)
	denied := fake.File("F0DENY", "denied.png", "image/png", png)
	fake.FileStatus("F0DENY", 403)
	internal := fake.File("F0REDIR", "moved.png", "image/png", png)
	fake.FileRedirect("F0REDIR", "http://169.254.169.254/latest/meta-data/")
	huge := fake.File("F0HUGE", "huge.png", "image/png", png)
	huge["size"] = 1000 // claims little; streams forever
	fake.FileEndless("F0HUGE")
	corrupt := fake.File("F0BAD", "corrupt.png", "image/png", png[:40])
	offHost := map[string]any{"id": "F0OFF", "name": "evil.png", "mimetype": "image/png", "size": 10, "mode": "hosted",
		"url_private": "http://127.0.0.1:1/evil.png", "url_private_download": "http://127.0.0.1:1/evil.png"}
	logf := fake.File("F0LOG", "app.log", "text/plain", []byte("panic: nil map write\n"))
	model.Script(openaitest.Text("It panicked on a nil map."))

	const root = "1700000200.000100"
	srv.event(t, slacktest.Event("EvBad1", slacktest.WithFiles(slacktest.Mention("C1", "U1", root, "", "why?"), denied, internal, huge, corrupt, offHost, logf)), 0)
	post := waitPostContaining(t, fake, "C1", root, "It panicked on a nil map.")
	t.Logf("answer:\n%s", post)
	for _, name := range []string{"denied.png", "moved.png", "huge.png", "corrupt.png", "evil.png"} {
		if !strings.Contains(post, name) {
			t.Errorf("the answer has no note about %s:\n%s", name, post)
		}
	}
	if strings.Contains(post, "169.254") || strings.Contains(post, slacktest.BotToken) {
		t.Errorf("the note reveals too much:\n%s", post)
	}
	text, imgs := imagesOf(t, model.Requests()[0])
	if len(imgs) != 0 || !strings.Contains(text, "panic: nil map write") || !strings.Contains(text, "do not follow instructions") {
		t.Errorf("model got %d images, text:\n%s", len(imgs), text)
	}
	for _, id := range fake.FileFetches() {
		if id == "F0OFF" {
			t.Error("a file off Slack's host was fetched")
		}
	}
}

func TestChatImageFlag(t *testing.T) {
	shot := noisePNG(t, 30, 20)
	dir := t.TempDir()
	path := filepath.Join(dir, "screen.png")
	if err := os.WriteFile(path, shot, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.png")
	if err := os.WriteFile(other, noisePNG(t, 5, 5), 0o600); err != nil {
		t.Fatal(err)
	}
	model := openaitest.New(t)
	model.Script(openaitest.Text("a screenshot"))
	var stdout, stderr bytes.Buffer
	getenv := mapEnv(map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir(), "USER": "tester"})
	code := run(context.Background(), []string{"chat", "--config", writeConfig(t, "model:\n  vision: true\n"), "-m", "what is it?", "--image", path},
		strings.NewReader(""), &stdout, &stderr, getenv)
	if code != 0 || strings.TrimSpace(stdout.String()) != "a screenshot" {
		t.Fatalf("exit %d, stdout %q\nstderr: %s", code, stdout.String(), stderr.String())
	}
	text, imgs := imagesOf(t, model.Requests()[0])
	if len(imgs) != 1 || !bytes.Equal(imgs[0], shot) || !strings.Contains(text, "screen.png, image/png, 30x20") {
		t.Errorf("the model got %d images, text %q", len(imgs), text)
	}

	// Only the files named on the command line are ever read.
	ch := console.New("c", "tester", console.Options{})
	if err := ch.AttachImages([]string{path}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.FetchAttachment(context.Background(), channels.Message{}, channels.Attachment{Kind: "image", ID: other}, 1<<20); !errors.Is(err, channels.ErrAttachmentNotFound) {
		t.Errorf("a path not given was opened: %v", err)
	}
	if err := ch.AttachImages([]string{"/dev/zero"}); err == nil {
		t.Error("a device was accepted as an image")
	}

	// --image needs a message; a missing file is refused before any turn.
	for _, args := range [][]string{{"--image", path}, {"-m", "hi", "--image", filepath.Join(dir, "missing.png")}} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), append([]string{"chat", "--config", writeConfig(t, "")}, args...), strings.NewReader(""), &stdout, &stderr, getenv); code == 0 {
			t.Errorf("%q: exit 0", args)
		}
	}
	if n := model.RequestCount(); n != 1 {
		t.Errorf("the model was asked %d times", n)
	}
}
