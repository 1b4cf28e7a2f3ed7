package wecomapp

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
	var fake *wechattest.WeComApp // the fake of the adapter built last
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel {
			r := redistest.New(t)
			fake = wechattest.NewWeComApp(t, testCorp, testSecret, testAgent)
			a, err := New(Config{Apps: []App{testApp(fake)}}, testOptions(r, "contract"), m, log)
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		Capabilities: []channeltest.Capability{channeltest.Runner, channeltest.HTTPChannel, channeltest.AttachmentFetcher, channeltest.PostCounter, channeltest.Uploader},
		Secrets:      []string{testSecret, testToken, testAESKey},
		Message:      channels.Message{Channel: Name, Workspace: testAppName, Chat: "zhangsan", User: "zhangsan", DM: true},
		FailSends: func(n int) {
			for range n {
				fake.Fail(wechattest.WeComSendPath, wechattest.Failure{Status: http.StatusServiceUnavailable})
			}
		},
		SendAttempts: func() int { return len(fake.Calls(wechattest.WeComSendPath)) },
		Watch:        []string{"github.com/parleyhq/parley/channels/wechat/wxapi"},
	})
}
