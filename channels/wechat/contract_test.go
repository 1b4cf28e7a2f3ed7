package wechat

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestContract runs the adapter with both transports: an iLink bot that is
// logged in and a WeCom AI bot. Sends go over iLink.
func TestContract(t *testing.T) {
	const wecomSecret, botToken = "wecom-contract-secret", "ilink-contract-bot-token"
	var ilink *wechattest.ILink // the fake of the adapter built last
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel {
			r := redistest.New(t)
			ilink = wechattest.NewILink(t)
			ilink.SetToken(botToken)
			wecom := wechattest.NewWeCom(t, "aibot-contract", wecomSecret)
			st := NewRedisState(r.Client, r.Prefix)
			loggedIn(t, st, ilink)
			cdn := wechattest.NewMedia(t) // iLink's CDN, for Uploader
			a, err := New(Config{WeComBotID: wecom.BotID, WeComSecret: config.Secret(wecom.Secret), WeComWSURL: wecom.URL(), ILinkCDNURL: cdn.CDNURL()}, Options{
				Client: r.Client, Prefix: r.Prefix, State: st, HTTP: &http.Client{},
				LeaseTTL: 900 * time.Millisecond, AccountRefresh: 100 * time.Millisecond,
				RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond,
				PingInterval: 100 * time.Millisecond, AckTimeout: 2 * time.Second, TypingInterval: 50 * time.Millisecond,
			}, m, log)
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		Capabilities: []channeltest.Capability{channeltest.Runner, channeltest.Typing, channeltest.Health, channeltest.Streamer, channeltest.Poster, channeltest.PosterFor, channeltest.AttachmentFetcher, channeltest.PostCounter, channeltest.Uploader},
		Secrets:      []string{wecomSecret, botToken},
		Message: channels.Message{Channel: Name, Workspace: "bot-1@im.bot", Chat: "u-contract",
			Meta: map[string]string{"via": ViaILink, "context_token": "ctx-contract"}},
		FailSends: func(n int) {
			for range n {
				ilink.ScriptSendStatus(http.StatusServiceUnavailable)
			}
		},
		SendAttempts: func() int { return len(ilink.Sends()) },
	})
}
