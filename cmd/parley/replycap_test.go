package main

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// TestReplyCapCutsARunawayAnswer: a model answering 200,000 characters
// does not flood the Slack thread: the answer is cut to the builtin
// limits.reply_posts posts, ends with a note saying where, and the history
// holds the same cut text.
func TestReplyCapCutsARunawayAnswer(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	// Streamed in large pieces: one token a chunk would put 200,000
	// characters past the model body cap (4 MiB of server-sent events).
	model := openaitest.New(t, openaitest.WithChunkRunes(2000))
	model.Script(openaitest.Text(strings.Repeat("runaway ", 25_000))) // 200,000 characters
	fake := slacktest.New(t)
	srv := startSlackServe(t, r, model, fake)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", srv.stderr.String())
		}
	})

	const root = "1700000002.000100"
	srv.event(t, slacktest.Event("EvCap1", slacktest.Mention("C1", "U1", root, "", "write forever")), 0)
	var posts []string
	slacktest.WaitFor(t, "the cut note in C1/"+root, slackDeadline, func() bool {
		posts = posts[:0]
		for _, p := range fake.Posts() {
			if p.Channel == "C1" && p.ThreadTS == root {
				posts = append(posts, p.Text)
			}
		}
		return len(posts) > 0 && strings.Contains(posts[len(posts)-1], "answer cut at")
	})
	if len(posts) > policy.DefaultReplyPosts {
		t.Fatalf("%d posts, want at most %d", len(posts), policy.DefaultReplyPosts)
	}
	shown := strings.Join(posts, "")
	if n := strings.Count(shown, "runaway"); n == 0 || n*len("runaway ") > policy.DefaultReplyChars {
		t.Errorf("%d words shown, want some and within %d characters", n, policy.DefaultReplyChars)
	}

	store := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix})
	history, err := store.History(t.Context(), "slack:"+slacktest.TeamID+":C1:"+root)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 || history[1].Role != "assistant" {
		t.Fatalf("history %d messages, want the question and the answer", len(history))
	}
	stored := history[1].Content
	if !strings.Contains(stored, "answer cut at") || strings.Count(stored, "runaway") != strings.Count(shown, "runaway") {
		t.Errorf("stored answer (%d bytes, %d words) is not what was shown (%d words)", len(stored), strings.Count(stored, "runaway"), strings.Count(shown, "runaway"))
	}
}
