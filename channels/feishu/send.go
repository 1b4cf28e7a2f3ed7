package feishu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// APIError is a failed Open API call: Feishu's code and msg, the HTTP
// status and the log_id to quote to Feishu support.
type APIError struct {
	Op     string
	Status int
	Code   int
	Msg    string
	LogID  string
	// Reset is the wait a rate limit asked for (x-ogw-ratelimit-reset),
	// or 0.
	Reset time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("feishu %s: code %d: %s (http %d, log_id %s)", e.Op, e.Code, e.Msg, e.Status, e.LogID)
}

// retryableCodes are Feishu codes worth another try: rate limits and
// transient server errors.
var retryableCodes = map[int]bool{
	99991400: true, // request too frequent (app or tenant rate limit)
	230020:   true, // im: frequency limit of the chat or user
	11232:    true, // im: create message rate limit
	11233:    true, // im: too many messages in the chat
	1000004:  true, // internal error
	1000005:  true, // internal error
}

// codeMissingField is the Code of an APIError made for an answer that
// succeeded but lacks the field Parley needs of it (a card_id, a
// message_id): that method cannot be used, so it counts as a refusal and
// the reply takes the documented fallback.
const codeMissingField = -2

// missingField is the refusal of an op that answered without field.
func missingField(op, field string) error {
	return &APIError{Op: op, Status: http.StatusOK, Code: codeMissingField, Msg: "answered without its " + field}
}

// label is the code label of ChannelAPIErrors: Feishu's code, or the
// HTTP status when the answer carried none.
func (e *APIError) label() string {
	if e.Code == codeMissingField {
		return "missing_field"
	}
	if e.Code == -1 {
		return "http_" + strconv.Itoa(e.Status)
	}
	return strconv.Itoa(e.Code)
}

// Retryable reports whether another attempt may succeed.
func (e *APIError) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500 || retryableCodes[e.Code]
}

// reason is the retry loop's name for the failure.
func (e *APIError) reason() retry.Reason {
	switch e.Code {
	case 99991400, 230020, 11232, 11233:
		return retry.RateLimited
	case 1000004, 1000005:
		return retry.ServerError
	case -1:
		if e.Status >= 500 || e.Status == http.StatusTooManyRequests {
			return retry.StatusReason(e.Status)
		}
		return retry.BadResponse
	}
	if e.Status >= 400 {
		return retry.StatusReason(e.Status)
	}
	return retry.ClientError
}

// apiResult is the envelope every Open API answer shares.
type apiResult struct {
	Code  int    `json:"code"`
	Msg   string `json:"msg"`
	Error *struct {
		LogID string `json:"log_id"`
	} `json:"error"`
}

// call performs one Open API request with the tenant token (the SDK's token
// manager fetches and refreshes it) on the retry loop, up to Options.Attempts
// tries while the error is retryable. Failures are counted by code and
// logged with code, msg and log_id (in the error). out, when non-nil,
// receives the whole JSON answer.
func (a *Adapter) call(ctx context.Context, op, method, path string, params map[string]string, body, out any) error {
	return a.callWith(ctx, a.calls, op, method, path, params, nil, body, out)
}

// callN is call with its own number of tries and query parameters.
func (a *Adapter) callN(ctx context.Context, attempts int, op, method, path string, params map[string]string, query map[string]string, body, out any) error {
	return a.callWith(ctx, a.calls.WithAttempts(attempts), op, method, path, params, query, body, out)
}

func (a *Adapter) callWith(ctx context.Context, calls *retry.Retrier, op, method, path string, params, query map[string]string, body, out any) error {
	return calls.Do(ctx, op, func(ctx context.Context) (bool, time.Duration, error) {
		err := a.callOnce(ctx, op, method, path, params, query, body, out)
		if err == nil {
			return false, 0, nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			a.m.ChannelAPIErrors.WithLabelValues(Name, apiErr.label()).Inc()
			return apiErr.Retryable(), 0, retry.Mark(apiErr.reason(), err)
		}
		if ctx.Err() != nil {
			return false, 0, err
		}
		a.m.ChannelAPIErrors.WithLabelValues(Name, "network").Inc()
		return true, 0, err
	})
}

func (a *Adapter) callOnce(ctx context.Context, op, method, path string, params map[string]string, query map[string]string, body, out any) error {
	req := &larkcore.ApiReq{
		HttpMethod:                method,
		ApiPath:                   path,
		Body:                      body,
		PathParams:                larkcore.PathParams{},
		QueryParams:               larkcore.QueryParams{},
		SupportedAccessTokenTypes: []larkcore.AccessTokenType{larkcore.AccessTokenTypeTenant},
	}
	for k, v := range params {
		req.PathParams[k] = v
	}
	for k, v := range query {
		req.QueryParams[k] = []string{v}
	}
	resp, err := larkcore.Request(ctx, req, a.api)
	if err != nil {
		// The token request failing with a Feishu code surfaces here.
		var ce larkcore.CodeError
		if errors.As(err, &ce) {
			e := &APIError{Op: op + " (tenant token)", Code: ce.Code, Msg: ce.Msg}
			if ce.Err != nil {
				e.LogID = ce.Err.LogID
			}
			return e
		}
		return fmt.Errorf("feishu %s: %w", op, err)
	}
	var res apiResult
	logID := resp.LogId()
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") || json.Unmarshal(resp.RawBody, &res) != nil {
		return &APIError{Op: op, Status: resp.StatusCode, Code: -1, Msg: "non-JSON answer", LogID: logID}
	}
	if res.Error != nil && res.Error.LogID != "" {
		logID = res.Error.LogID
	}
	if res.Code != 0 || resp.StatusCode >= 300 {
		return &APIError{Op: op, Status: resp.StatusCode, Code: res.Code, Msg: res.Msg, LogID: logID, Reset: rateLimitReset(resp.Header)}
	}
	if out != nil {
		if err := json.Unmarshal(resp.RawBody, out); err != nil {
			return fmt.Errorf("feishu %s: decode answer: %w", op, err)
		}
	}
	return nil
}

// Send implements channels.Channel: the Markdown reply as interactive cards
// with a markdown element (plain text where a card is refused), split below
// the size limit, each with a uuid so Feishu drops a repeated send. In groups
// it replies to the user's message (in its thread when configured); in a
// direct chat it writes to the chat.
func (a *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	if r.Approval != nil {
		_, err := a.SendPrompt(ctx, m, r)
		return err
	}
	if a.clickReply(ctx, m, r) {
		return nil
	}
	if q := r.Question; q != nil && len(q.Choices) > 0 && len(q.Choices) <= maxQuestionButtons {
		return a.sendQuestion(ctx, m, r) // card_question.go
	}
	if r.Decided != nil && a.drawDecision(ctx, r.Decided) {
		return nil
	}
	chunks := channels.Split(r.Text, a.opts.ChunkBytes)
	for i, chunk := range chunks {
		if err := a.sendChunk(ctx, m, i, chunk); err != nil {
			return err
		}
	}
	a.markAnswered(ctx, m, r)
	return nil
}

// markAnswered remembers the thread of m as answered, so that it is
// followed without a new mention; a notice (a refusal) does not count.
func (a *Adapter) markAnswered(ctx context.Context, m channels.Message, r channels.Reply) {
	if m.DM || !a.cfg.FollowThreads || m.Meta[MetaThreadKey] == "" || r.Notice {
		return
	}
	if err := a.state.markThread(ctx, m.Meta[MetaThreadKey], a.opts.ThreadTTL); err != nil {
		a.log.Warn("cannot remember the answered thread", "err", err)
	}
}

// Posts implements channels.PostCounter: how many cards Send makes of text.
func (a *Adapter) Posts(_ channels.Message, text string) int {
	return len(channels.Split(text, a.opts.ChunkBytes))
}

func (a *Adapter) sendChunk(ctx context.Context, m channels.Message, i int, chunk string) error {
	_, err := a.postChunk(ctx, a.calls, true, m, i, chunk)
	return err
}

// postChunk sends part i of an answer as a card, or as plain text where
// the card is refused, with calls (its tries); paced waits for the chat's
// rate on this replica (the outbox paces its posts itself). It returns
// the id of the message made.
func (a *Adapter) postChunk(ctx context.Context, calls *retry.Retrier, paced bool, m channels.Message, i int, chunk string) (string, error) {
	card, err := json.Marshal(cardFor(chunk))
	if err != nil {
		return "", err
	}
	if paced {
		if err := a.waitChat(ctx, m); err != nil {
			return "", err
		}
	}
	id, err := a.postWith(ctx, calls, m, "interactive", string(card), sendUUID(m, i, "card", chunk))
	var apiErr *APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.Retryable() {
		return id, err
	}
	a.log.Warn("card refused; sending plain text instead", "code", apiErr.Code, "msg", apiErr.Msg, "log_id", apiErr.LogID)
	text, _ := json.Marshal(map[string]string{"text": chunk})
	if paced {
		if err := a.waitChat(ctx, m); err != nil {
			return "", err
		}
	}
	return a.postWith(ctx, calls, m, "text", string(text), sendUUID(m, i, "text", chunk))
}

// post sends one message, within the chat's rate, with the adapter's
// retries.
func (a *Adapter) post(ctx context.Context, m channels.Message, msgType, content, uuid string) error {
	if err := a.waitChat(ctx, m); err != nil {
		return err
	}
	_, err := a.postWith(ctx, a.calls, m, msgType, content, uuid)
	return err
}

// postWith makes one message answering m with calls (its tries) and
// returns the id Feishu gave it. In groups it replies to the user's
// message (in its thread when configured); in a direct chat, or without a
// message to reply to, it writes to the chat.
func (a *Adapter) postWith(ctx context.Context, calls *retry.Retrier, m channels.Message, msgType, content, uuid string) (string, error) {
	var out struct {
		Data struct {
			MessageID string `json:"message_id"`
		} `json:"data"`
	}
	replyTo := ""
	if m.Meta != nil {
		replyTo = m.Meta[MetaMessageID]
	}
	if m.DM || replyTo == "" {
		body := map[string]any{"receive_id": m.Chat, "msg_type": msgType, "content": content, "uuid": uuid}
		err := a.callWith(ctx, calls, "send", http.MethodPost, "/open-apis/im/v1/messages", nil,
			map[string]string{"receive_id_type": "chat_id"}, body, &out)
		return out.Data.MessageID, err
	}
	body := map[string]any{"msg_type": msgType, "content": content, "uuid": uuid}
	if m.Meta[MetaInThread] == "1" {
		body["reply_in_thread"] = true
	}
	err := a.callWith(ctx, calls, "reply", http.MethodPost, "/open-apis/im/v1/messages/:message_id/reply",
		map[string]string{"message_id": replyTo}, nil, body, &out)
	return out.Data.MessageID, err
}

// sendUUID is stable for one piece of one answer, so a retried send (or a
// second attempt after a lost response) is dropped by Feishu, while a
// different answer to the same message still goes out. At most 50 chars.
func sendUUID(m channels.Message, i int, kind, chunk string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00", m.Chat, m.Meta[MetaMessageID], i, kind)
	h.Write([]byte(chunk))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// cardFor builds an interactive card whose one element is the Markdown.
// It is a shared card (update_multi), which Feishu requires of a card
// before and after it is edited (Edit): everyone sees the one card anyway.
func cardFor(md string) map[string]any {
	return map[string]any{
		"config":   map[string]any{"wide_screen_mode": true, "update_multi": true},
		"elements": []any{map[string]any{"tag": "markdown", "content": cardMarkdown(md)}},
	}
}

// cardMarkdown adapts model Markdown to the card's dialect, which has no
// headings: outside code fences, "# Title" lines become bold lines.
func cardMarkdown(md string) string {
	lines := strings.Split(md, "\n")
	inFence := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(t, "#") {
			continue
		}
		h := strings.TrimLeft(t, "#")
		if n := len(t) - len(h); n <= 6 && strings.HasPrefix(h, " ") && strings.TrimSpace(h) != "" {
			lines[i] = "**" + strings.TrimSpace(h) + "**"
		}
	}
	return strings.Join(lines, "\n")
}

// StartTyping implements channels.Typing: a reaction on the user's message
// while the turn runs, removed by the returned func. The reaction is added
// in the background; stop waits for that call, so nothing outlives it.
func (a *Adapter) StartTyping(ctx context.Context, m channels.Message) (stop func()) {
	msgID := ""
	if m.Meta != nil {
		msgID = m.Meta[MetaMessageID]
	}
	if msgID == "" || a.opts.TypingEmoji == "-" {
		return func() {}
	}
	var reactionID string
	done := make(chan struct{})
	go func() {
		defer close(done)
		var out struct {
			Data struct {
				ReactionID string `json:"reaction_id"`
			} `json:"data"`
		}
		body := map[string]any{"reaction_type": map[string]string{"emoji_type": a.opts.TypingEmoji}}
		if err := a.callN(ctx, 1, "add_reaction", http.MethodPost, "/open-apis/im/v1/messages/:message_id/reactions",
			map[string]string{"message_id": msgID}, nil, body, &out); err != nil {
			return
		}
		reactionID = out.Data.ReactionID
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			<-done
			if reactionID == "" {
				return
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = a.callN(dctx, 2, "remove_reaction", http.MethodDelete, "/open-apis/im/v1/messages/:message_id/reactions/:reaction_id",
				map[string]string{"message_id": msgID, "reaction_id": reactionID}, nil, nil, nil)
		})
	}
}

// waitChat waits for the next slot of m's chat: with Redis, from the
// budget every replica (and the outbox) shares; else on this replica. A
// Redis failure posts unpaced rather than not at all.
func (a *Adapter) waitChat(ctx context.Context, m channels.Message) error {
	if a.opts.Redis == nil {
		return a.limiter.wait(ctx, m.Chat)
	}
	err := a.chatPace.Wait(ctx, Name, m.Workspace, m.Chat, a.opts.ChatInterval, 1)
	if err != nil && ctx.Err() == nil {
		a.log.Debug("cannot pace a message; sending it anyway", "err", err)
		return nil
	}
	return err
}

// chatLimiter spaces the messages sent to one chat (Feishu allows 5 per
// second per user or group) on this replica, where there is no Redis to
// share the chat's budget in.
type chatLimiter struct {
	interval time.Duration
	mu       sync.Mutex
	next     map[string]time.Time
}

func newChatLimiter(interval time.Duration) *chatLimiter {
	return &chatLimiter{interval: interval, next: map[string]time.Time{}}
}

func (l *chatLimiter) wait(ctx context.Context, chat string) error {
	l.mu.Lock()
	now := time.Now()
	if len(l.next) > 1024 {
		for k, t := range l.next {
			if t.Before(now) {
				delete(l.next, k)
			}
		}
	}
	at := l.next[chat]
	if at.Before(now) {
		at = now
	}
	l.next[chat] = at.Add(l.interval)
	l.mu.Unlock()
	if d := at.Sub(now); d > 0 && !retry.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// Address implements channels.Addresser: of a message the bot starts
// itself (a trigger's work, not an event) it fills in, in a thread (the id of the
// thread's root message, which the bot posted), a reply to that root in
// its thread, and the key by which the adapter follows the thread; with
// no thread, a post to the chat.
func (a *Adapter) Address(m *channels.Message) {
	if m.Thread == "" {
		return
	}
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	m.Meta[MetaMessageID] = m.Thread
	m.Meta[MetaInThread] = "1"
	m.Meta[MetaThreadKey] = m.Chat + ":" + m.Thread
}
