package wecomapp

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestCallbackReplayWithAnotherBodyRefused: the signed query of a callback
// is accepted with one body only, on any replica: msg_signature signs the
// ciphertext, not the envelope around it. WeCom's retry, body and all,
// still gets in (TestRetriedCallbackAnsweredOnceAcrossReplicas).
func TestCallbackReplayWithAnotherBodyRefused(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
	cfg := Config{Apps: []App{testApp(fake)}}
	a := startReplica(t, r, cfg, testOptions(r, "a"))
	b := startReplica(t, r, cfg, testOptions(r, "b"))
	platform := wechattest.NewPlatform(t, testToken, testAESKey, testCorp)
	req := platform.Encrypted(t, wechattest.Inbound{To: testCorp, From: "lisi", Content: "hello", MsgID: "7101", AgentID: strconv.Itoa(testAgent)}, false)
	if ans := wechattest.Post(t, a.url(), req); ans.Status != http.StatusOK {
		t.Fatalf("the genuine callback answered %d %q", ans.Status, ans.Body)
	}
	forged := req
	forged.Body = bytes.Replace(req.Body, []byte("<ToUserName><![CDATA["+testCorp), []byte("<ToUserName><![CDATA[ww-forged"), 1)
	if ans := wechattest.Post(t, b.url(), forged); ans.Status != http.StatusForbidden {
		t.Fatalf("the replayed query with another body answered %d %q; want 403", ans.Status, ans.Body)
	}
	if n := rejected(b.m, wxcrypto.ReasonReplayed); n != 1 {
		t.Fatalf("rejected{reason=replayed} = %v; want 1", n)
	}
	keys, err := r.Client.Keys(t.Context(), r.Prefix+Name+":*seen:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("replay keys under the prefix = %v, %v; want one", keys, err)
	}
}
