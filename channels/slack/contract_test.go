package slack

import (
	"log/slog"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/channeltest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/metrics"
)

func TestContract(t *testing.T) {
	var fake *slacktest.Server // the fake of the adapter built last
	channeltest.Run(t, channeltest.Subject{
		Name: Name,
		New: func(t *testing.T, m *metrics.Metrics, log *slog.Logger) channels.Channel {
			fake = slacktest.New(t)
			a, err := New(Config{
				BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, AppToken: slacktest.AppToken,
				APIURL: fake.APIURL(), FollowThreads: true,
			}, Options{
				RetryWait: 5 * time.Millisecond, ReconnectWait: 10 * time.Millisecond,
			}, m, log)
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
		Capabilities: []channeltest.Capability{channeltest.Runner, channeltest.Typing, channeltest.HTTPChannel, channeltest.Health, channeltest.Streamer, channeltest.LiveAdopter, channeltest.Poster, channeltest.KeyedPoster, channeltest.Prompter, channeltest.AttachmentFetcher, channeltest.RoomReader, channeltest.Editor, channeltest.Addresser, channeltest.Uploader},
		Secrets:      []string{slacktest.BotToken, slacktest.Secret, slacktest.AppToken},
		Message:      threadMsg(),
		FailSends: func(n int) {
			for range n {
				fake.Fail("chat.postMessage", slacktest.Failure{Status: 503})
			}
		},
		SendAttempts: func() int { return fake.Count("chat.postMessage") },
		Room: func(*testing.T) channels.Message {
			root := fake.Say("C1", "", "U1", "one")
			fake.Say("C1", root, "U2", "two")
			fake.Say("C1", root, "U3", "three")
			asked := fake.Say("C1", root, "U1", "<@"+slacktest.BotUserID+"> summarise")
			return channels.Message{ID: "Ev" + asked, Channel: Name, Workspace: slacktest.TeamID, Chat: "C1", Thread: root, User: "U1",
				Meta: map[string]string{MetaTS: asked, MetaThreadTS: root}}
		},
		Watch: []string{"github.com/slack-go/slack"},
	})
}
