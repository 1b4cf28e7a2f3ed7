package slack

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/metrics"
)

// TestLiveRepliesShareAChannelsPace: live replies that two replicas start
// in one channel at once take their first messages' slots from the
// channel's budget in Redis (the one the outbox's posts use), so Slack
// sees the streams start a second apart, not in a burst. The pacer only
// ever delays, so a loaded machine widens the gaps and cannot narrow them.
func TestLiveRepliesShareAChannelsPace(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	f := newFixture(t, func(c *Config, o *Options) {
		o.Redis, o.Prefix = r.Client, r.Prefix
		o.AppendEvery, o.UpdateEvery = time.Nanosecond, time.Nanosecond
		c.PostBurst = 1 // every stream takes its own slot
	})
	other, err := New(f.a.cfg, f.a.opts, metrics.New(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const replies = 3
	start := time.Now()
	errs := make(chan error, replies)
	var wg sync.WaitGroup
	for i, a := range []*Adapter{f.a, other, f.a} {
		m := liveMsg(slacktest.TeamID)
		m.Thread = fmt.Sprintf("100.%d", 10+i)
		m.Meta = map[string]string{MetaTS: m.Thread, MetaThreadTS: m.Thread}
		wg.Go(func() { errs <- liveAnswer(context.Background(), a, m, fmt.Sprintf("answer %d", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var starts []time.Time
	for _, c := range f.slack.Log() {
		if c.Method == "chat.startStream" && c.Channel == "C1" {
			starts = append(starts, c.At)
		}
	}
	if len(starts) != replies {
		t.Fatalf("%d streams started in C1, want %d: %v", len(starts), replies, methods(f.slack.Log()))
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// Stream k (oldest first) takes the k-th slot of the channel's budget,
	// which cannot come before start plus k paces: a loaded machine delays
	// a request but never moves a slot earlier, so this bound holds however
	// late any one stream arrives. Redis's clock paces, the fake's stamps:
	// allow them a little skew.
	every := f.a.Pace().Every
	for k, at := range starts {
		if got, earliest := at.Sub(start), time.Duration(k)*every; got < earliest-every/10 {
			t.Errorf("stream %d started %v after the first try; the channel's pace allows it no sooner than %v", k+1, got, earliest)
		}
	}
}

// TestPostEveryIsTheChannelsPace: slack.post_every and slack.post_burst
// set the pace the outbox and live replies keep in each channel; left
// out, it is Slack's one post a second after a burst of three; negative,
// the configuration is refused.
func TestPostEveryIsTheChannelsPace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		postEvery time.Duration
		postBurst int
		want      channels.Pace
	}{
		{0, 0, channels.Pace{Every: time.Second, Burst: DefaultPostBurst}},
		{250 * time.Millisecond, 0, channels.Pace{Every: 250 * time.Millisecond, Burst: DefaultPostBurst}},
		{0, 1, channels.Pace{Every: time.Second, Burst: 1}},
		{0, 5, channels.Pace{Every: time.Second, Burst: 5}},
	} {
		f := newFixture(t, func(c *Config, _ *Options) { c.PostEvery, c.PostBurst = tc.postEvery, tc.postBurst })
		if got := f.a.Pace(); got != tc.want {
			t.Errorf("post_every %v, post_burst %d: Pace = %+v; want %+v", tc.postEvery, tc.postBurst, got, tc.want)
		}
	}
	for key, c := range map[string]Config{
		"post_every": {BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, PostEvery: -time.Second},
		"post_burst": {BotToken: slacktest.BotToken, SigningSecret: slacktest.Secret, PostBurst: -1},
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), key+":") {
			t.Errorf("Validate with a negative %s = %v; want it refused", key, err)
		}
	}
}

// liveAnswer shows text in a live reply and finishes it, as the gateway
// does; an answer the sink could not deliver is an error.
func liveAnswer(ctx context.Context, a *Adapter, m channels.Message, text string) error {
	sink, err := a.StartReply(ctx, m)
	if err != nil || sink == nil {
		return fmt.Errorf("StartReply = %v, %v", sink, err)
	}
	if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: text}); err != nil {
		return err
	}
	return sink.Finish(ctx, channels.Reply{Text: text})
}
