package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/chatpace"
	"github.com/parleyhq/parley/internal/ident"
	"github.com/parleyhq/parley/retry"
)

// MaxMessageBytes is the size of one posted message. Slack truncates text
// past 40,000 characters and advises staying under 4,000; chunks are cut
// below that on paragraph or line boundaries, never inside a code block.
const MaxMessageBytes = 3500

// TypingReaction is the reaction shown on a message while its turn runs.
const TypingReaction = "eyes"

// Send implements channels.Channel: the reply, converted to mrkdwn and cut
// to size, is posted into the thread of m (or, for a slash command, to its
// response_url as an ephemeral message). Each part is retried on 429
// (after Retry-After), 5xx and network errors, up to Options.MaxAttempts
// tries; a try that may have been posted is looked for before the next
// (once.go).
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	if r.Approval != nil || r.Decided != nil {
		return a.sendApproval(ctx, m, r) // approval.go
	}
	if r.Question != nil && len(r.Question.Choices) > 0 && len(r.Question.Choices) <= maxButtons {
		return a.sendQuestion(ctx, m, r) // question.go
	}
	chunks := a.Parts(m, r)
	method := postMethod(m)
	id := newDeliveryID()
	for i, chunk := range chunks {
		var err error
		if m.Meta[MetaResponseURL] != "" {
			// An ephemeral answer cannot be read back: tried as before.
			err = a.call(ctx, method, a.opts.MaxAttempts, func(ctx context.Context) error {
				_, err := a.postText(ctx, m, chunk, "")
				return err
			})
		} else {
			key := partKey(id, i)
			_, err = a.writeOnce(ctx, method, a.opts.MaxAttempts, m, key, false, func(ctx context.Context) (string, error) {
				return a.postText(ctx, m, chunk, key)
			})
		}
		if err != nil {
			return fmt.Errorf("slack: reply part %d of %d: %w", i+1, len(chunks), err)
		}
	}
	return nil
}

// Parts implements channels.Poster: the reply in mrkdwn, cut to size.
func (a *Adapter) Parts(_ channels.Message, r channels.Reply) []string {
	return channels.Split(ToMrkdwn(r.Text, a.cfg.AllowMentions), MaxMessageBytes)
}

// Post implements channels.Poster: one chat.postMessage (or response_url
// post) of part, returning the ts of the message it made (a response_url
// gives none). A failure is counted by Slack's error code and classified
// like the retry loop's.
func (a *Adapter) Post(ctx context.Context, m channels.Message, part string) (string, error) {
	return a.PostKeyed(ctx, m, part, "", false)
}

// PostKeyed implements channels.KeyedPoster: Post of part marked with
// key; when again, the thread is first read back for a message an earlier
// try marked with key, whose ts is returned instead of posting (once.go).
func (a *Adapter) PostKeyed(ctx context.Context, m channels.Message, part, key string, again bool) (string, error) {
	method := postMethod(m)
	if m.Meta[MetaResponseURL] != "" {
		key = "" // an ephemeral answer cannot be read back
	}
	var ts string
	var err error
	if again && key != "" {
		ts, err = a.written(ctx, m, key, a.opts.Now().Add(-lookupWindow))
	}
	if err == nil && ts == "" {
		ts, err = a.postText(ctx, m, part, key)
	}
	if err == nil {
		return ts, nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("slack: %s: %w", method, err)
	}
	f := a.failed(err)
	return "", &channels.PostError{Retry: f.retry, After: f.retryAfter, Err: retry.Mark(f.reason, fmt.Errorf("slack: %s: %w", method, err))}
}

// PostsPerSecond is Slack's published rate for posting into one channel:
// about one message a second, with short bursts tolerated.
const PostsPerSecond = 1

// DefaultPostBurst is the burst slack.post_burst leaves out: a quiet
// channel takes three posts at once, the short burst Slack tolerates.
const DefaultPostBurst = 3

// Pace implements channels.Poster: one post a second per channel, or
// every slack.post_every, after a quiet spell slack.post_burst at once.
func (a *Adapter) Pace() channels.Pace {
	return channels.Pace{Every: a.cfg.PostEvery, Burst: a.cfg.PostBurst}
}

// waitChat waits for the next posting slot of m's channel, from the
// budget every replica and the outbox share in Redis (without Redis, at
// once). A Redis failure posts unpaced rather than not at all.
func (a *Adapter) waitChat(ctx context.Context, m channels.Message) error {
	if a.opts.Redis == nil || m.Meta[MetaResponseURL] != "" {
		return nil // an ephemeral answer is no post into the channel
	}
	p := a.Pace()
	err := chatpace.Pacer{Client: a.opts.Redis, Prefix: a.opts.Prefix}.Wait(ctx, Name, m.Workspace, m.Chat, p.Every, p.Burst)
	if err != nil && ctx.Err() == nil {
		a.log.Debug("cannot pace a live reply; posting it anyway", "err", err)
		return nil
	}
	return err
}

// StartTyping implements channels.Typing with an :eyes: reaction on the
// message, removed by the returned func (after the answer is posted).
func (a *Adapter) StartTyping(ctx context.Context, m channels.Message) func() {
	ts := m.Meta[MetaTS]
	if ts == "" || m.Chat == "" {
		return func() {}
	}
	ref := slackapi.NewRefToMessage(m.Chat, ts)
	addCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := a.call(addCtx, "reactions.add", 1, func(ctx context.Context) error {
		err := a.api.AddReactionContext(ctx, TypingReaction, ref)
		if errorCode(err) == "already_reacted" {
			return nil // left by an earlier try of this turn
		}
		return err
	})
	cancel()
	if err != nil {
		return func() {}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = a.call(ctx, "reactions.remove", 2, func(ctx context.Context) error {
			err := a.api.RemoveReactionContext(ctx, TypingReaction, ref)
			if errorCode(err) == "no_reaction" {
				return nil
			}
			return err
		})
	}
}

// call runs a Web API call up to attempts times on the retry loop. Every
// failure is counted in parley_channel_api_errors_total by Slack's error
// code.
func (a *Adapter) call(ctx context.Context, method string, attempts int, fn func(context.Context) error) error {
	return a.calls.WithAttempts(attempts).Do(ctx, method, func(ctx context.Context) (bool, time.Duration, error) {
		err := fn(ctx)
		if err == nil {
			return false, 0, nil
		}
		if ctx.Err() != nil {
			return false, 0, fmt.Errorf("%s: %w", method, err)
		}
		f := a.failed(err)
		return f.retry, f.retryAfter, retry.Mark(f.reason, fmt.Errorf("%s: %w", method, err))
	})
}

// countAPIError counts a failure of a call made outside call.
func (a *Adapter) countAPIError(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	a.failed(err)
}

// failed classifies a failed Web API call and counts it; a refused token
// marks the account down until it signs in again.
func (a *Adapter) failed(err error) failure {
	f := classify(err)
	a.m.ChannelAPIErrors.WithLabelValues(Name, f.code).Inc()
	if authCodes[f.code] {
		a.refused.Store(&f.code)
		a.signedIn(false)
	}
	return f
}

// retryableCodes are ok:false errors worth another try, with their reason.
var retryableCodes = map[string]retry.Reason{
	"ratelimited": retry.RateLimited, "rate_limited": retry.RateLimited,
	"internal_error": retry.ServerError, "fatal_error": retry.ServerError,
	"service_unavailable": retry.ServerError, "request_timeout": retry.Timeout,
}

// failure is a classified Web API failure.
type failure struct {
	code       string        // bounded: Slack's own error string, http_NNN, network or other
	retryAfter time.Duration // what Slack asked to wait, or 0
	retry      bool
	reason     retry.Reason
}

// classify names a Web API failure by a bounded code (Slack's own error
// string when there is one) and says whether and when to try again.
func classify(err error) failure {
	var rl *slackapi.RateLimitedError
	var se slackapi.SlackErrorResponse
	var sc slackapi.StatusCodeError
	var ne net.Error
	switch {
	case errors.As(err, &rl):
		return failure{"ratelimited", max(rl.RetryAfter, time.Second), true, retry.RateLimited}
	case errors.As(err, &se):
		code := errorCode(err)
		if reason, ok := retryableCodes[code]; ok {
			return failure{code, 0, true, reason}
		}
		return failure{code, 0, false, retry.ClientError}
	case errors.As(err, &sc):
		if sc.Code == http.StatusTooManyRequests {
			return failure{"ratelimited", 0, true, retry.RateLimited}
		}
		return failure{fmt.Sprintf("http_%d", sc.Code), 0, sc.Code >= 500, retry.StatusReason(sc.Code)}
	case errors.As(err, &ne):
		return failure{"network", 0, true, retry.ReasonOf(err, 0)}
	}
	// A response_url answers in plain text ("expired_url", "used_url").
	if isCode(err.Error()) {
		return failure{err.Error(), 0, false, retry.ClientError}
	}
	return failure{"other", 0, false, retry.Other}
}

// isCode says whether s looks like a Slack error code (a lower-case
// letter, then up to 47 lower-case letters, digits and '_'), as opposed to
// a sentence that would make a metric label of its own.
func isCode(s string) bool { return ident.Led(s, codeFirst, codeRest, 0, 47) }

var codeFirst, codeRest = ident.Of("a-z"), ident.Of("a-z0-9_")

// errorCode is Slack's ok:false error string, or "".
func errorCode(err error) string {
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		if isCode(se.Err) {
			return se.Err
		}
		return "other"
	}
	return ""
}
