package feishu

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
	"github.com/parleyhq/parley/metrics"
)

func TestContract(t *testing.T) {
	var fake *feishutest.Server // the fake of the adapter built last
	const appSecret = "feishu-contract-app-secret"
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel {
			fake = feishutest.New(t)
			a, err := New(Config{
				AppID:     "cli_" + strings.NewReplacer("/", "_").Replace(t.Name()),
				AppSecret: appSecret, VerificationToken: testToken, EncryptKey: testKey,
				BaseURL: fake.URL, Mode: ModeWebsocket, ReplyInThread: true, FollowThreads: true,
			}, Options{
				RetryBase: 5 * time.Millisecond, ChatInterval: time.Millisecond,
				ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
			}, m, log)
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		Capabilities: []channeltest.Capability{channeltest.Runner, channeltest.Typing, channeltest.HTTPChannel, channeltest.Health, channeltest.Streamer, channeltest.LiveAdopter, channeltest.Poster, channeltest.Prompter, channeltest.AttachmentFetcher, channeltest.PostCounter, channeltest.RoomReader, channeltest.Editor, channeltest.Addresser, channeltest.Uploader},
		Secrets:      []string{appSecret, testToken, testKey},
		Message:      channels.Message{Channel: Name, Chat: "oc_dm", DM: true, Meta: map[string]string{MetaMessageID: "om_contract"}},
		FailSends: func(n int) {
			for range n {
				fake.Fail("create", feishutest.Failure{Status: 503, Code: 1000004, Msg: "internal error"})
			}
		},
		SendAttempts: func() int { return fake.Attempts("create") },
		Room: func(*testing.T) channels.Message {
			fake.Say("oc_c", "omt_c", "ou_a", "one")
			fake.Say("oc_c", "omt_c", "ou_b", "two")
			fake.Say("oc_c", "omt_c", "ou_c", "three")
			asked := fake.Say("oc_c", "omt_c", "ou_a", "@_user_1 summarise")
			return channels.Message{ID: asked.ID, Channel: Name, Workspace: "tenant", Chat: "oc_c", Thread: "omt_c", User: "ou_a",
				Meta: map[string]string{MetaMessageID: asked.ID, MetaChatType: "topic_group", MetaThreadID: "omt_c",
					MetaCreateTime: strconv.FormatInt(asked.CreateMS, 10)}}
		},
	})
}
