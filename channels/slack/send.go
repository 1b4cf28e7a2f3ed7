package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
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
// (after Retry-After), 5xx and network errors, up to MaxAttempts tries.
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	chunks := channels.Split(ToMrkdwn(r.Text), MaxMessageBytes)
	for i, chunk := range chunks {
		opts := []slackapi.MsgOption{slackapi.MsgOptionText(chunk, false), slackapi.MsgOptionDisableLinkUnfurl()}
		method := "chat.postMessage"
		if u := m.Meta[MetaResponseURL]; u != "" {
			opts = append(opts, slackapi.MsgOptionResponseURL(u, slackapi.ResponseTypeEphemeral))
			method = "response_url"
		} else if ts := m.Meta[MetaThreadTS]; ts != "" {
			opts = append(opts, slackapi.MsgOptionTS(ts))
		}
		err := a.call(ctx, method, a.cfg.MaxAttempts, func(ctx context.Context) error {
			_, _, err := a.api.PostMessageContext(ctx, m.Chat, opts...)
			return err
		})
		if err != nil {
			return fmt.Errorf("slack: reply part %d of %d: %w", i+1, len(chunks), err)
		}
	}
	return nil
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

// call runs a Web API call up to attempts times. Every failure is logged
// with Slack's error code and counted in parley_channel_api_errors_total.
func (a *Adapter) call(ctx context.Context, method string, attempts int, fn func(context.Context) error) error {
	wait := a.cfg.RetryWait
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", method, ctx.Err())
		}
		code, retryAfter, retryable := classify(err)
		a.m.ChannelAPIErrors.WithLabelValues(Name, code).Inc()
		if retryAfter > a.cfg.MaxRetryAfter {
			retryable = false
		}
		last := !retryable || attempt >= attempts
		a.log.Warn("slack: API call failed", "method", method, "error", code, "attempt", attempt, "retrying", !last)
		if last {
			return fmt.Errorf("%s: %w", method, err)
		}
		d := wait
		if retryAfter > 0 {
			d = retryAfter
		} else {
			wait *= 2
		}
		if !retry.Sleep(ctx, d) {
			return fmt.Errorf("%s: %w", method, ctx.Err())
		}
	}
}

// countAPIError counts a failure of a call made outside call.
func (a *Adapter) countAPIError(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	code, _, _ := classify(err)
	a.m.ChannelAPIErrors.WithLabelValues(Name, code).Inc()
}

// retryableCodes are ok:false errors worth another try.
var retryableCodes = map[string]bool{
	"ratelimited": true, "rate_limited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// classify names a Web API failure by a bounded code (Slack's own error
// string when there is one) and says whether and when to try again.
func classify(err error) (code string, retryAfter time.Duration, retry bool) {
	var rl *slackapi.RateLimitedError
	var se slackapi.SlackErrorResponse
	var sc slackapi.StatusCodeError
	var ne net.Error
	switch {
	case errors.As(err, &rl):
		return "ratelimited", max(rl.RetryAfter, time.Second), true
	case errors.As(err, &se):
		code := errorCode(err)
		return code, 0, retryableCodes[code]
	case errors.As(err, &sc):
		if sc.Code == http.StatusTooManyRequests {
			return "ratelimited", 0, true
		}
		return fmt.Sprintf("http_%d", sc.Code), 0, sc.Code >= 500
	case errors.As(err, &ne):
		return "network", 0, true
	}
	// A response_url answers in plain text ("expired_url", "used_url").
	if codeRe.MatchString(err.Error()) {
		return err.Error(), 0, false
	}
	return "other", 0, false
}

var codeRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// errorCode is Slack's ok:false error string, or "".
func errorCode(err error) string {
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		if codeRe.MatchString(se.Err) {
			return se.Err
		}
		return "other"
	}
	return ""
}
