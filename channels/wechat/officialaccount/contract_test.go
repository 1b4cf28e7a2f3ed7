package officialaccount

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

func TestContract(t *testing.T) {
	var fake *wechattest.OfficialAccount // the fake of the adapter built last
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel {
			r := redistest.New(t)
			fake = wechattest.NewOfficialAccount(t, testAppID, testSecret)
			a, err := New(testConfig(fake, testAESKey), testOptions(r, "contract"), m, log)
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		Capabilities: []channeltest.Capability{channeltest.Runner, channeltest.Typing, channeltest.HTTPChannel, channeltest.AttachmentFetcher, channeltest.PostCounter, channeltest.Unanswered, channeltest.Uploader},
		Secrets:      []string{testSecret, testToken, testAESKey},
		// Not from a callback: the answer goes out as customer-service
		// messages.
		Message: channels.Message{Channel: Name, Workspace: testAppID, Chat: "o-contract-user", User: "o-contract-user", DM: true},
		FailSends: func(n int) {
			for range n {
				fake.Fail(wechattest.OACustomPath, wechattest.Failure{Status: http.StatusServiceUnavailable})
			}
		},
		SendAttempts: func() int { return len(fake.Calls(wechattest.OACustomPath)) },
		Watch:        []string{"github.com/parleyhq/parley/channels/wechat/wxapi"},
	})
}
