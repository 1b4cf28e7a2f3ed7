package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// screenshotPNG is a real PNG (the gateway decodes what it sends).
func screenshotPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 5), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lastUser is the text and the decoded data-URL images of a request's
// last user message.
func lastUser(t *testing.T, req openai.ChatCompletionRequest) (string, [][]byte) {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		if len(m.MultiContent) == 0 {
			return m.Content, nil
		}
		var text string
		var imgs [][]byte
		for _, p := range m.MultiContent {
			switch p.Type {
			case openai.ChatMessagePartTypeText:
				text += p.Text
			case openai.ChatMessagePartTypeImageURL:
				_, data, ok := strings.Cut(p.ImageURL.URL, ";base64,")
				if !ok || !strings.HasPrefix(p.ImageURL.URL, "data:image/") {
					t.Fatalf("image part is not a data URL: %.60s", p.ImageURL.URL)
				}
				b, err := base64.StdEncoding.DecodeString(data)
				if err != nil {
					t.Fatal(err)
				}
				imgs = append(imgs, b)
			}
		}
		return text, imgs
	}
	t.Fatal("no user message")
	return "", nil
}

// redisValues are every string, list and hash value of the keys under r's
// prefix, joined. r must be the Redis serve was given: without REDIS_URL,
// each redistest.New starts a server of its own.
func redisValues(t *testing.T, r *redistest.Redis) string {
	t.Helper()
	ctx := context.Background()
	var all strings.Builder
	iter := r.Client.Scan(ctx, 0, r.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		switch typ, _ := r.Client.Type(ctx, key).Result(); typ {
		case "string":
			v, _ := r.Client.Get(ctx, key).Result()
			all.WriteString(v + "\n")
		case "list":
			vs, _ := r.Client.LRange(ctx, key, 0, -1).Result()
			all.WriteString(strings.Join(vs, "\n") + "\n")
		case "hash":
			vs, _ := r.Client.HGetAll(ctx, key).Result()
			for _, v := range vs {
				all.WriteString(v + "\n")
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return all.String()
}

// A screenshot pasted with a mention into a Feishu group reaches a vision
// model as an image_url part with exactly its bytes, and the answer comes
// back in the thread; the history keeps a reference, not the bytes. In
// the same thread, an image Feishu refuses (403) and one that never ends
// get a short note each while the text is answered, and the endless one
// is not read past the download limit.
func TestFeishuScreenshotReachesAVisionModel(t *testing.T) {
	s := startFeishuServeYAML(t, "model:\n  vision: true\nmedia:\n  max_download_bytes: 1048576\n", nil)
	shot := screenshotPNG(t, 320, 200)
	s.api.AddResource("om_shot", "img_v3_shot", shot, "image/png")
	s.api.AddResourceBehaviour("om_next", "img_v3_denied", feishutest.ResourceForbidden)
	s.api.AddResourceBehaviour("om_next", "img_v3_endless", feishutest.ResourceEndless)
	mention := []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}}
	s.model.Script(openaitest.Text("The dialog says the disk is full."), openaitest.Text("I could not see those."))

	ev := feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: "om_shot", ChatID: "oc_ops", ChatType: "group", Sender: "ou_alice",
		MsgType: "post", Content: feishutest.PostContent("", "@_user_1 what does this dialog mean?", "img_v3_shot"), Mentions: mention})
	if code := s.post(t, ev); code != 200 {
		t.Fatalf("callback answered %d", code)
	}
	pollUntil(t, "the answer", s.stderr, func() bool { return len(s.api.Sent()) >= 1 })
	sent := s.api.Sent()
	if sent[0].ReplyTo != "om_shot" || !sent[0].ReplyInThread || sent[0].Text != "The dialog says the disk is full." {
		t.Fatalf("answer %+v; want a threaded reply to om_shot", sent[0])
	}
	reqs := s.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model saw %d requests", len(reqs))
	}
	text, imgs := lastUser(t, reqs[0])
	if len(imgs) != 1 || !bytes.Equal(imgs[0], shot) {
		t.Fatalf("the model got %d images; want the screenshot's exact bytes", len(imgs))
	}
	if !strings.HasPrefix(text, "what does this dialog mean?") {
		t.Errorf("user text %q", text)
	}
	if types := s.api.ResourceTypes(); len(types) != 1 || types[0] != "image" {
		t.Errorf("resource downloads %v", types)
	}
	// The history: the image's key and checksum, never its bytes.
	// (Stored as the turn ends, after the answer is sent.)
	var stored string
	pollUntil(t, "the reference in the history", s.stderr, func() bool {
		stored = redisValues(t, s.redis)
		return strings.Contains(stored, `"id":"img_v3_shot"`)
	})
	if strings.Contains(stored, base64.StdEncoding.EncodeToString(shot)[:80]) {
		t.Errorf("stored values hold the screenshot's bytes")
	}

	// A follow-up in the thread with two images that cannot be read.
	before := s.api.ResourceBytesServed()
	next := feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: "om_next", RootID: "om_shot", ParentID: "om_shot", ThreadID: "omt_shot",
		ChatID: "oc_ops", ChatType: "group", Sender: "ou_alice",
		MsgType: "post", Content: feishutest.PostContent("", "@_user_1 and these?", "img_v3_denied", "img_v3_endless"), Mentions: mention})
	if code := s.post(t, next); code != 200 {
		t.Fatalf("callback answered %d", code)
	}
	pollUntil(t, "the second answer", s.stderr, func() bool { return len(s.api.Sent()) >= 2 })
	second := s.api.Sent()[1]
	t.Logf("second answer: %q", second.Text)
	if !strings.HasPrefix(second.Text, "I could not see those.") || !strings.Contains(second.Text, "couldn't download img_v3_denied") || !strings.Contains(second.Text, "img_v3_endless (it is too large)") || strings.Count(second.Text, "Note:") != 2 {
		t.Errorf("second answer %q; want the text answered and a note per image", second.Text)
	}
	text, imgs = lastUser(t, s.model.Requests()[1])
	if !strings.HasPrefix(text, "and these?") {
		t.Errorf("second user text %q", text)
	}
	// The first turn's screenshot may be sent again (it is recent); the
	// two unreadable images never are.
	for _, img := range imgs {
		if !bytes.Equal(img, shot) {
			t.Errorf("the model got an image that is not the screenshot (%d bytes)", len(img))
		}
	}
	if served := s.api.ResourceBytesServed() - before; served > 8<<20 {
		t.Errorf("%d bytes served for the endless image (limit 1 MiB)", served)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
}

// WeChat through parley serve: a WeCom AI-bot mixed message (text and a
// screenshot encrypted with its own key) and an iLink image item from the
// CDN each reach a vision model with exactly the screenshot's bytes; a
// WeCom image whose address has expired (403) gets a note.
func TestWeChatImagesReachAVisionModel(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t)
	ilink := wechattest.NewILink(t)
	wecom := wechattest.NewWeCom(t, "aibot-media", "wecom-secret")
	media := wechattest.NewMedia(t)
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\nmodel:\n  vision: true\nwechat:\n  wecom_media_hosts: [%q]\n", r.Prefix, media.URL()))
	env := map[string]string{
		"PARLEY_CONFIG": cfg, "REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test",
		"PARLEY_HOME": t.TempDir(), "WECHAT_ILINK_BASE_URL": ilink.URL(), "WECHAT_ILINK_CDN_URL": media.CDNURL(),
		"WECOM_BOT_ID": wecom.BotID, "WECOM_BOT_SECRET": wecom.Secret, "WECOM_WS_URL": wecom.URL(),
	}
	wechatLogin(t, env)
	s := startWeChatServe(t, env)
	wechatEventually(t, "the WeCom subscription", wecom.Connected, s.stderr)
	shot := screenshotPNG(t, 200, 120)
	model.Script(openaitest.Text("WeCom: a chart."), openaitest.Text("iLink: a chart."), openaitest.Text("expired"))

	key := wechattest.WeComMediaKey(9)
	url := media.Add("/BHoPdA3/1?sign=abc", wechattest.EncryptWeCom(shot, key), "application/octet-stream")
	if err := wecom.SendCallback(wechattest.Callback{ReqID: "req-img", MsgID: "msg-img", User: "zhangsan", MsgType: "mixed", Text: "what is this?",
		Images: []wechattest.MediaRef{{URL: url, AESKey: key}}}); err != nil {
		t.Fatal(err)
	}
	wechatEventually(t, "the WeCom answer", func() bool { _, fin := wechatFinishedFrames(wecom, "req-img"); return fin > 0 }, s.stderr)
	frames, _ := wechatFinishedFrames(wecom, "req-img")
	if last := frames[len(frames)-1].Stream(); last.Content != "WeCom: a chart." {
		t.Errorf("WeCom answer %q", last.Content)
	}
	text, imgs := lastUser(t, model.Requests()[0])
	if len(imgs) != 1 || !bytes.Equal(imgs[0], shot) || !strings.HasPrefix(text, "what is this?") {
		t.Fatalf("WeCom turn: text %q, %d images (want the exact screenshot)", text, len(imgs))
	}

	ckey := []byte("0123456789abcdef")
	media.AddCDN("ENC_PARAM_1", wechattest.EncryptILink(shot, ckey))
	ilink.Add(wechattest.Message{ID: 11, From: "alice@im.wechat", ContextToken: "ctx-a", Image: &wechattest.ILinkImage{Param: "ENC_PARAM_1", AESKey: ckey}})
	wechatEventually(t, "the iLink answer", func() bool { return len(ilink.Sends()) > 0 }, s.stderr)
	if sends := ilink.Sends(); sends[0].To != "alice@im.wechat" || sends[0].Text != "iLink: a chart." {
		t.Errorf("iLink sends %+v", sends)
	}
	if _, imgs := lastUser(t, model.Requests()[1]); len(imgs) != 1 || !bytes.Equal(imgs[0], shot) {
		t.Fatalf("iLink turn: %d images (want the exact screenshot)", len(imgs))
	}
	// The history keeps the references (the WeCom message's item, the
	// iLink message's), not the bytes.
	// (Stored as the turn ends, after the answer is sent.)
	var stored string
	wechatEventually(t, "the references in the history", func() bool {
		stored = redisValues(t, r)
		return strings.Contains(stored, "msg-img#0") && strings.Contains(stored, ilink.BotID+":11#0")
	}, s.stderr)
	if strings.Contains(stored, base64.StdEncoding.EncodeToString(shot)[:80]) {
		t.Errorf("stored values hold the image's bytes")
	}

	// An expired address: the text is answered, the image noted.
	expired := media.AddBehaviour("/BHoPdA3/2", wechattest.MediaForbidden)
	if err := wecom.SendCallback(wechattest.Callback{ReqID: "req-old", MsgID: "msg-old", User: "lisi", MsgType: "mixed", Text: "and this?",
		Images: []wechattest.MediaRef{{URL: expired, AESKey: key}}}); err != nil {
		t.Fatal(err)
	}
	wechatEventually(t, "the answer with the note", func() bool { _, fin := wechatFinishedFrames(wecom, "req-old"); return fin > 0 }, s.stderr)
	frames, _ = wechatFinishedFrames(wecom, "req-old")
	if last := frames[len(frames)-1].Stream().Content; !strings.HasPrefix(last, "expired") || !strings.Contains(last, "couldn't download") {
		t.Errorf("answer %q; want the text answered and the image noted", last)
	}
}

// A log file sent to the Feishu bot in a direct chat is downloaded as a
// file resource and quoted to the model as data with its name.
func TestFeishuLogFileIsQuotedToTheModel(t *testing.T) {
	s := startFeishuServeYAML(t, "model:\n  vision: true\n", nil)
	log := "2026-11-30 21:00:01 ERROR payment-api: connection refused (db:5432)\n2026-11-30 21:00:02 WARN retrying\n"
	s.api.AddResource("om_log", "file_v3_log", []byte(log), "application/octet-stream")
	s.model.Script(openaitest.Text("The database refused connections."))
	ev := feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: "om_log", ChatID: "oc_dm", ChatType: "p2p", Sender: "ou_bob",
		MsgType: "file", Content: feishutest.FileContent("file_v3_log", "payment.log")})
	if code := s.post(t, ev); code != 200 {
		t.Fatalf("callback answered %d", code)
	}
	pollUntil(t, "the answer", s.stderr, func() bool { return len(s.api.Sent()) >= 1 })
	if got := s.api.Sent()[0]; got.ChatID != "oc_dm" || got.Text != "The database refused connections." {
		t.Errorf("answer %+v", got)
	}
	text, imgs := lastUser(t, s.model.Requests()[0])
	if len(imgs) != 0 || !strings.Contains(text, "payment.log") || !strings.Contains(text, "ERROR payment-api: connection refused (db:5432)") {
		t.Errorf("user message %q, %d images", text, len(imgs))
	}
	if types := s.api.ResourceTypes(); len(types) != 1 || types[0] != "file" {
		t.Errorf("resource downloads %v", types)
	}
}
