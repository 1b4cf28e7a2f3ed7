package slack

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// TestEditRewritesTheBotsPostInMrkdwn: Edit is chat.update of the post's
// ts with the part as Parts renders it; a post the bot did not make, one
// that is gone and a rate limit are told apart for the caller's retries.
func TestEditRewritesTheBotsPostInMrkdwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	m := channels.Message{Channel: Name, Workspace: slacktest.TeamID, Chat: "C1"}
	ts, err := f.a.Post(ctx, m, f.a.Parts(m, channels.Reply{Text: "🔥 **[FIRING:1] DiskFull**"})[0])
	if err != nil {
		t.Fatal(err)
	}
	part := f.a.Parts(m, channels.Reply{Text: "✅ **[RESOLVED:1] DiskFull**"})[0]
	if err := f.a.Edit(ctx, m, ts, part); err != nil {
		t.Fatalf("Edit = %v", err)
	}
	edits := f.slack.Edits()
	if len(edits) != 1 || edits[0].TS != ts || edits[0].Channel != "C1" || edits[0].Text != "✅ *[RESOLVED:1] DiskFull*" {
		t.Fatalf("edits %+v; want the post's ts rewritten in mrkdwn", edits)
	}
	if posts := f.slack.Posts(); len(posts) != 1 || posts[0].Text != edits[0].Text {
		t.Errorf("posts %+v; want the one post, showing its new text", posts)
	}

	theirs := f.slack.Say("C1", "", "U1", "a person's message")
	f.slack.Fail("chat.update", slacktest.Failure{Status: 429, RetryAfter: "3"})
	cases := []struct {
		name  string
		ts    string
		retry bool
		after time.Duration
		code  string
	}{
		{"rate limited", ts, true, 3 * time.Second, "ratelimited"},
		{"someone else's message", theirs, false, 0, "cant_update_message"},
		{"a message that is gone", "1700000000.999999", false, 0, "message_not_found"},
	}
	for _, c := range cases {
		err := f.a.Edit(ctx, m, c.ts, part)
		again, after := channels.Retryable(err)
		if err == nil || again != c.retry || after != c.after {
			t.Errorf("%s: Edit = %v (retry %v after %s); want retry %v after %s", c.name, err, again, after, c.retry, c.after)
		}
		if n := f.apiErrors(c.code); n != 1 {
			t.Errorf("%s: parley_channel_api_errors_total{code=%q} = %v; want 1", c.name, c.code, n)
		}
	}
	if n := len(f.slack.Edits()); n != 1 {
		t.Errorf("%d edits; want only the first", n)
	}
}
