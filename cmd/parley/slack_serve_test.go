package main

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
)

func TestSlackConfigurationErrorsStopServe(t *testing.T) {
	model := openaitest.New(t)
	fake := slacktest.New(t)
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"secret without bot token", map[string]string{"SLACK_SIGNING_SECRET": "s3cret-value"}, "SLACK_BOT_TOKEN"},
		{"bot token without a transport", map[string]string{"SLACK_BOT_TOKEN": slacktest.BotToken}, "SLACK_SIGNING_SECRET"},
		{"bot token refused", map[string]string{"SLACK_BOT_TOKEN": "xoxb-refused-token", "SLACK_SIGNING_SECRET": "s3cret-value"}, "invalid_auth"},
		{"bot token as app token", map[string]string{"SLACK_BOT_TOKEN": slacktest.BotToken, "SLACK_APP_TOKEN": "xoxb-not-an-app-token"}, "xapp-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"OPENAI_BASE_URL": model.URL(), "PARLEY_LISTEN": "127.0.0.1:0", "PARLEY_HOME": t.TempDir(), "SLACK_API_URL": fake.APIURL()}
			for k, v := range tt.env {
				env[k] = v
			}
			var stderr syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code := run(ctx, []string{"serve"}, nil, io.Discard, &stderr, mapEnv(env))
			out := stderr.String()
			if code == 0 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d; want a failure naming %s:\n%s", code, tt.want, out)
			}
			for _, secret := range []string{"s3cret-value", "xoxb-refused-token", "xoxb-not-an-app-token"} {
				if strings.Contains(out, secret) {
					t.Fatalf("a secret is in the output:\n%s", out)
				}
			}
		})
	}
}

func TestSlackSlashCommandThroughTheGateway(t *testing.T) {
	r := redistest.New(t)
	model := openaitest.New(t)
	fake := slacktest.New(t)
	srv := startSlackServe(t, r, model, fake)
	form := url.Values{"team_id": {slacktest.TeamID}, "channel_id": {"C1"}, "user_id": {"U1"}, "user_name": {"ana"},
		"command": {"/parley"}, "text": {"/help"}, "response_url": {fake.ResponseURL("tr1")}, "trigger_id": {"tr1"}}
	req := slacktest.Signed(t, srv.base+"/slack/commands", slacktest.Secret, time.Now(), []byte(form.Encode()))
	if status, body := slacktest.Do(t, req); status != 200 || body != "" {
		t.Fatalf("POST /slack/commands: %d %q", status, body)
	}
	slacktest.WaitFor(t, "the ephemeral answer", slackDeadline, func() bool {
		for _, p := range fake.Posts() {
			if p.ResponseURL == "/response/tr1" && p.ResponseType == "ephemeral" && strings.Contains(p.Text, "/reset") {
				return true
			}
		}
		return false
	})
	if model.RequestCount() != 0 {
		t.Fatal("a chat command reached the model")
	}
	out := srv.stderr.String()
	if strings.Contains(out, slacktest.BotToken) || strings.Contains(out, slacktest.Secret) {
		t.Fatalf("a secret is in the log:\n%s", out)
	}
}
