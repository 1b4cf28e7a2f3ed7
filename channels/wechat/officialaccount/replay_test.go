package officialaccount

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/internal/redistest"
)

// TestCallbackReplayWithAnotherBodyRefused: the signed query of a callback
// (timestamp, nonce, signature) is accepted with one body only, on any
// replica. In plaintext mode the signature does not cover the body, so a
// captured callback URL would otherwise carry any message for five
// minutes; the encrypted modes do not sign the envelope around the
// ciphertext either. The platform's retry, body and all, still gets in
// (TestRetriedCallbackAnsweredOnceAcrossReplicas).
func TestCallbackReplayWithAnotherBodyRefused(t *testing.T) {
	for _, mode := range []string{"plaintext", "safe"} {
		t.Run(mode, func(t *testing.T) {
			key := ""
			if mode == "safe" {
				key = testAESKey
			}
			c := newCluster(t, key)
			a, b := c.replica(t, "a", nil), c.replica(t, "b", nil)
			var req, forged wechattest.Request
			if key == "" {
				req = c.platform.Plain(inbound("o-first", "hello", "501"))
				forged = req
				forged.Body = c.platform.Plain(inbound("o-victim", "forged order", "502")).Body
			} else {
				req = c.platform.Encrypted(t, inbound("o-first", "hello", "501"), true)
				forged = req
				forged.Body = bytes.Replace(req.Body, []byte(testOriginal), []byte("gh_forged"), 1)
			}
			if _, ok := c.platform.Reply(t, wechattest.Post(t, a.url(), req)); !ok {
				t.Fatal("no passive reply to the genuine callback")
			}
			if ans := wechattest.Post(t, b.url(), forged); ans.Status != http.StatusForbidden {
				t.Fatalf("the replayed query with another body answered %d %q; want 403", ans.Status, ans.Body)
			}
			c.gw.turns.Wait()
			if msgs := c.gw.messages(); len(msgs) != 1 || msgs[0].User != "o-first" {
				t.Fatalf("turns = %+v; want the genuine message's only", msgs)
			}
			if n := rejected(b.m, wxcrypto.ReasonReplayed); n != 1 {
				t.Fatalf("rejected{reason=replayed} = %v; want 1", n)
			}
			keys, err := c.r.Client.Keys(t.Context(), c.r.Prefix+Name+":*seen:*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("replay keys under the prefix = %v, %v; want one", keys, err)
			}
		})
	}
}

// TestPlaintextModeWarnsAtStart: an account without an EncodingAESKey is
// told, as a warning, that its callbacks' bodies are not authenticated.
func TestPlaintextModeWarnsAtStart(t *testing.T) {
	r := redistest.New(t)
	fake := wechattest.NewOfficialAccount(t, testAppID, testSecret)
	for _, key := range []string{"", testAESKey} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if _, err := New(testConfig(fake, key), testOptions(r, "a"), nil, log); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "plaintext")
		if warned != (key == "") {
			t.Fatalf("key %q: log %q; want a plaintext-mode warning exactly without a key", key, buf.String())
		}
	}
}
