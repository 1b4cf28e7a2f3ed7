package wechat

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// screenshot is the start of a PNG and a body whose length is not a
// multiple of the cipher blocks.
var screenshot = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{9, 8, 7}, 777)...)

// mediaAdapter is an adapter that may download from the fake media host.
func mediaAdapter(t *testing.T, media *wechattest.Media) *Adapter {
	t.Helper()
	r := redistest.New(t)
	cfg := testConfig(r, "A")
	cfg.WeComBotID, cfg.WeComSecret = "aibot-media", "s"
	cfg.MediaHosts = []string{media.URL()}
	cfg.ILinkCDNURL = media.CDNURL()
	a, err := cfg.new()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func fetch(a *Adapter, att channels.Attachment, limit int64) ([]byte, error) {
	rc, err := a.FetchAttachment(context.Background(), channels.Message{Channel: Name}, att, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func wecomAtt(url, key string) channels.Attachment {
	return channels.Attachment{Kind: channels.AttachmentImage, ID: "m#0", Meta: map[string]string{attachVia: ViaWeCom, attachURL: url, attachAESKey: key}}
}

func TestWeComMediaParsed(t *testing.T) {
	t.Parallel()
	body := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	img := map[string]string{"url": "https://ww-aibot-img-1.cos.ap-guangzhou.myqcloud.com/a?sign=x", "aeskey": "K"}
	got := wecomAttachments(body(map[string]any{"msgtype": "image", "image": img}), "m1")
	if len(got) != 1 || got[0].Kind != channels.AttachmentImage || got[0].ID != "m1#0" || got[0].Meta[attachURL] != img["url"] || got[0].Meta[attachAESKey] != "K" || got[0].Meta[attachVia] != ViaWeCom {
		t.Errorf("image: %+v", got)
	}
	got = wecomAttachments(body(map[string]any{"msgtype": "mixed", "mixed": map[string]any{"msg_item": []any{
		map[string]any{"msgtype": "text", "text": map[string]string{"content": "look"}},
		map[string]any{"msgtype": "image", "image": img},
		map[string]any{"msgtype": "image", "image": img},
	}}}), "m2")
	if len(got) != 2 || got[1].ID != "m2#1" {
		t.Errorf("mixed: %+v", got)
	}
	got = wecomAttachments(body(map[string]any{"msgtype": "file", "file": map[string]string{"url": "u", "aeskey": "k", "filename": "app.log"}}), "m3")
	if len(got) != 1 || got[0].Kind != channels.AttachmentFile || got[0].Name != "app.log" {
		t.Errorf("file: %+v", got)
	}
	for _, b := range []string{`{"msgtype":"image"}`, `{"msgtype":"voice","voice":{"content":""}}`, `[]`, `{"msgtype":"image","image":{"url":""}}`} {
		if got := wecomAttachments(json.RawMessage(b), "m"); len(got) != 0 {
			t.Errorf("%s: %+v", b, got)
		}
	}
}

// A WeCom image: downloaded from the media host, decrypted with the
// message's key, exactly the bytes sent.
func TestWeComMediaDownloadDecrypts(t *testing.T) {
	t.Parallel()
	media := wechattest.NewMedia(t)
	a := mediaAdapter(t, media)
	key := wechattest.WeComMediaKey(3)
	url := media.Add("/BHoPdA3/1?sign=q", wechattest.EncryptWeCom(screenshot, key), "application/octet-stream")
	got, err := fetch(a, wecomAtt(url, key), 1<<20)
	if err != nil || !bytes.Equal(got, screenshot) {
		t.Fatalf("download: %d bytes, %v", len(got), err)
	}
	// The key padded or not is the same key.
	if got, err := fetch(a, wecomAtt(url, key+"="), 1<<20); err != nil || !bytes.Equal(got, screenshot) {
		t.Fatalf("padded key: %v", err)
	}
	// Exactly at the limit is fine, one byte under it is not.
	if _, err := fetch(a, wecomAtt(url, key), int64(len(screenshot))); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if _, err := fetch(a, wecomAtt(url, key), int64(len(screenshot)-1)); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
}

func TestWeComMediaRefusals(t *testing.T) {
	t.Parallel()
	media := wechattest.NewMedia(t)
	a := mediaAdapter(t, media)
	key := wechattest.WeComMediaKey(3)
	good := media.Add("/ok", wechattest.EncryptWeCom(screenshot, key), "")
	const limit = 256 << 10

	if _, err := fetch(a, wecomAtt(media.AddBehaviour("/expired", wechattest.MediaForbidden), key), limit); !errors.Is(err, channels.ErrAttachmentForbidden) {
		t.Errorf("403: %v", err)
	}
	before := media.BytesServed()
	if _, err := fetch(a, wecomAtt(media.AddBehaviour("/huge", wechattest.MediaHuge), key), limit); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("announced 1 GiB: %v", err)
	}
	if _, err := fetch(a, wecomAtt(media.AddBehaviour("/endless", wechattest.MediaEndless), key), limit); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("endless: %v", err)
	}
	if served := media.BytesServed() - before; served > 16<<20 {
		t.Errorf("%d bytes served for two refused downloads", served)
	}
	// A wrong key, and bytes that are no ciphertext at all.
	if _, err := fetch(a, wecomAtt(good, wechattest.WeComMediaKey(4)), limit); !errors.Is(err, errBadMedia) {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := fetch(a, wecomAtt(media.Add("/corrupt", []byte("not encrypted"), "image/png"), key), limit); !errors.Is(err, errBadMedia) {
		t.Errorf("corrupt: %v", err)
	}
	// Addresses off WeCom's media host are never asked for: the link-local
	// metadata address, an internal name, plain http, another bucket, a
	// look-alike host.
	reqs := media.Requests()
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://redis:6379/",
		"http://ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com/x",
		"https://evil-bucket-1.cos.ap-guangzhou.myqcloud.com/x",
		"https://ww-aibot-img-1.myqcloud.com.evil.example/x",
		"https://ww-aibot-img-1.cos.ap-guangzhou.myqcloud.com:8443/x",
		"https://user:pw@ww-aibot-img-1.cos.ap-guangzhou.myqcloud.com/x",
		strings.Replace(good, "127.0.0.1", "localhost", 1),
		"",
	} {
		if _, err := fetch(a, wecomAtt(u, key), limit); err == nil {
			t.Errorf("fetched %q", u)
		}
	}
	// A redirect off the media host is not followed; one on it is.
	elsewhere := wechattest.NewMedia(t)
	target := elsewhere.Add("/internal", wechattest.EncryptWeCom(screenshot, key), "")
	if _, err := fetch(a, wecomAtt(media.AddRedirect("/moved", target), key), limit); err == nil {
		t.Error("followed a redirect off the media host")
	}
	if elsewhere.Requests() != 0 {
		t.Error("the redirect's target was asked")
	}
	if got, err := fetch(a, wecomAtt(media.AddRedirect("/moved-here", good), key), limit); err != nil || !bytes.Equal(got, screenshot) {
		t.Errorf("redirect on the media host: %v", err)
	}
	reqs = media.Requests()
	if _, err := fetch(a, wecomAtt(good, "short"), limit); err == nil {
		t.Error("malformed key accepted")
	}
	if _, err := fetch(a, channels.Attachment{Kind: channels.AttachmentImage, ID: "x", Meta: map[string]string{attachURL: good, attachAESKey: key}}, limit); err == nil {
		t.Error("attachment without a transport fetched")
	}
	if got := media.Requests() - reqs; got != 0 {
		t.Errorf("refused addresses made %d requests", got)
	}
	// The signed address is a credential for the file: errors name the
	// host only.
	if _, err := fetch(a, wecomAtt(media.URL()+"/missing?sign=SECRET-SIG", key), limit); err == nil || strings.Contains(err.Error(), "SECRET-SIG") {
		t.Errorf("missing file: %v", err)
	}
}

func TestILinkMediaParsedAndDownloaded(t *testing.T) {
	t.Parallel()
	media := wechattest.NewMedia(t)
	a := mediaAdapter(t, media)
	key := []byte("0123456789abcdef")
	media.AddCDN("PARAM+/=1", wechattest.EncryptILink(screenshot, key))
	for _, asMedia := range []bool{false, true} {
		raw := wechattest.Message{ID: 7, From: "u@im.wechat", Text: "what is this?", Image: &wechattest.ILinkImage{Param: "PARAM+/=1", AESKey: key, KeyAsMedia: asMedia}}
		atts := ilinkAttachments(raw.Wire("bot"), "bot:7")
		if len(atts) != 1 || atts[0].Kind != channels.AttachmentImage || atts[0].ID != "bot:7#0" || atts[0].Meta[attachParam] != "PARAM+/=1" ||
			atts[0].Meta[attachAESKey] != base64.StdEncoding.EncodeToString(key) {
			t.Fatalf("key as media %v: %+v", asMedia, atts)
		}
		got, err := fetch(a, atts[0], 1<<20)
		if err != nil || !bytes.Equal(got, screenshot) {
			t.Fatalf("download: %d bytes, %v", len(got), err)
		}
	}
	att := ilinkAttachments(wechattest.Message{ID: 8, Image: &wechattest.ILinkImage{Param: "P2", AESKey: key}}.Wire("bot"), "bot:8")[0]
	media.AddCDN("P2", wechattest.EncryptILink(screenshot, []byte("fedcba9876543210")))
	if _, err := fetch(a, att, 1<<20); !errors.Is(err, errBadMedia) {
		t.Errorf("wrong key: %v", err)
	}
	media.AddCDNBehaviour("P2", wechattest.MediaForbidden)
	if _, err := fetch(a, att, 1<<20); !errors.Is(err, channels.ErrAttachmentForbidden) {
		t.Errorf("403: %v", err)
	}
	media.AddCDNBehaviour("P2", wechattest.MediaEndless)
	if _, err := fetch(a, att, 64<<10); !errors.Is(err, channels.ErrAttachmentTooLarge) {
		t.Errorf("endless: %v", err)
	}
	// An image item without a usable key or download is no attachment.
	for _, raw := range []string{
		`{"item_list":[{"type":2,"image_item":{"url":"x"}}]}`,
		`{"item_list":[{"type":2,"image_item":{"aeskey":"zz","media":{"encrypt_query_param":"p"}}}]}`,
		`{"item_list":[{"type":2,"image_item":{"aeskey":"00112233445566778899aabbccddeeff","media":{}}}]}`,
	} {
		if got := ilinkAttachments(json.RawMessage(raw), "b:1"); len(got) != 0 {
			t.Errorf("%s: %+v", raw, got)
		}
	}
}

// wecom_media_hosts adds hosts WeCom media may come from; anything but
// scheme://host[:port] is refused at load.
func TestWeComMediaHostsConfig(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"ftp://media", "https://media/path", "media.example", "https://u:p@media", "https://media?x=1"} {
		c := DefaultConfig()
		c.WeComMediaHosts = []string{bad}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "wecom_media_hosts") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	r := redistest.New(t)
	cfg := testConfig(r, "A")
	cfg.WeComBotID, cfg.WeComSecret = "b", "s"
	cfg.WeComMediaHosts = []string{"https://media-proxy.internal:8443"}
	if c := cfg.Config.withDefaults(); c.Validate() != nil {
		t.Fatal(c.Validate())
	}
	a, err := cfg.new()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.wecomMediaURL("https://media-proxy.internal:8443/img/1"); err != nil {
		t.Errorf("configured host refused: %v", err)
	}
	if _, err := a.wecomMediaURL("http://media-proxy.internal:8443/img/1"); err == nil {
		t.Error("configured host over another scheme accepted")
	}
}
