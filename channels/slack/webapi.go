package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// maxAnswerBytes bounds what is read of one Web API answer. A post's
// answer (the message with its blocks) is a few kilobytes.
const maxAnswerBytes = 1 << 20

// postedAnswer is what Parley reads of chat.postMessage's answer: the
// message's ts, and the error fields slack-go reads. Slack's answer also
// holds the whole message as stored (its blocks, the bot's profile),
// which slack-go decodes into its Message type on every post: most of
// the CPU and allocations of a post, for a value Parley never reads.
type postedAnswer struct {
	slackapi.SlackResponse
	TS string `json:"ts"`
}

// answerBufs holds the buffers Web API answers are read into.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// postText posts text answering m and returns the ts of the message it
// made (a slash command's response_url gives none). key, when set, marks
// the message (once.go). The errors are slack-go's (RateLimitedError,
// StatusCodeError, SlackErrorResponse), so that classify reads them alike.
func (a *Adapter) postText(ctx context.Context, m channels.Message, text, key string) (string, error) {
	if u := m.Meta[MetaResponseURL]; u != "" {
		_, ts, err := a.api.PostMessageContext(ctx, m.Chat, slackapi.MsgOptionText(text, false),
			slackapi.MsgOptionDisableLinkUnfurl(), slackapi.MsgOptionResponseURL(u, slackapi.ResponseTypeEphemeral))
		return ts, err
	}
	// The form slack-go sends for the same options, byte for byte.
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "channel": {m.Chat}, "text": {text}, "unfurl_links": {"false"}}
	if ts := m.Meta[MetaThreadTS]; ts != "" {
		form["thread_ts"] = []string{ts}
	}
	if key != "" {
		form["metadata"] = []string{marking(key)}
	}
	var ans postedAnswer
	if err := a.postForm(ctx, "chat.postMessage", form, &ans); err != nil {
		return "", err
	}
	return ans.TS, nil
}

// postMethod names the method a post answering m goes through.
func postMethod(m channels.Message) string {
	if m.Meta[MetaResponseURL] != "" {
		return "response_url"
	}
	return "chat.postMessage"
}

// postForm calls a Web API method with form and decodes its answer into
// ans, as slack-go does: a 429 with Retry-After is a RateLimitedError,
// any other status but 200 a StatusCodeError, and ok:false ans's Err.
func (a *Adapter) postForm(ctx context.Context, method string, form url.Values, ans interface{ Err() error }) error {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.APIURL+method, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := answerBufs.Get().(*bytes.Buffer)
	defer func() {
		buf.Reset()
		answerBufs.Put(buf)
	}()
	// Read to the end, so that the connection goes back to the pool.
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
		after, perr := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		if perr != nil {
			return perr
		}
		return &slackapi.RateLimitedError{RetryAfter: time.Duration(after) * time.Second}
	}
	if resp.StatusCode != http.StatusOK {
		return slackapi.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(buf.Bytes(), ans); err != nil {
		return fmt.Errorf("decode the answer: %w: %w", errUnreadAnswer, err)
	}
	return ans.Err()
}
