package feishu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// A live reply on Feishu is a card written while the answer comes:
//
//   - cardkit: a card entity (CardKit, JSON 2.0) in streaming mode is made,
//     sent as the reply, its markdown element updated with the whole text
//     so far (Feishu types out the difference), and streaming closed with
//     the final text and a summary for the chat list;
//   - patch: where CardKit is refused (no cardkit:card:write scope), a
//     shared interactive card is sent and edited (PATCH im/v1/messages);
//   - post: where that is refused too, nothing is shown while the answer
//     is written, and the answer is posted when complete.
//
// Each mode given up is counted in parley_reply_stream_fallbacks_total and
// remembered for the workspace for a while, so the next replies start
// with the mode that works. A card is updated at most CardUpdateInterval
// apart (Feishu allows 10 updates a second per card). An answer longer
// than one card keeps its first part in the card; the rest follows as
// cards, as Send makes them.

// Modes of a live reply, the from and to of the fallback metric.
const (
	modeCardKit = "cardkit"
	modePatch   = "patch"
	modePost    = "post"
)

const (
	// DefaultCardUpdateInterval spaces the updates of one card: Feishu
	// allows 10 a second per card entity, and 5 a second per message for
	// a patched card (patch mode waits twice as long).
	DefaultCardUpdateInterval = 100 * time.Millisecond
	// DefaultStreamEvery is feishu.stream_every left out: a live card
	// takes the new text at most once a second while it is written.
	DefaultStreamEvery = time.Second
	// MinStreamChars is the least new text worth an update of a live card
	// while it is written (a status change is worth one by itself).
	MinStreamChars = 24
	// answerElement is the element_id of the card's markdown.
	answerElement = "answer"
	// modeMemory is how long a refused mode is skipped for a workspace
	// (a scope granted meanwhile is used after it).
	modeMemory = time.Hour
	// summaryRunes bounds the card's summary in the chat list.
	summaryRunes = 60
)

var _ channels.Streamer = (*Adapter)(nil)

// errNotShown is Finish's answer when nothing of the reply is shown: the
// gateway then posts it (through the outbox).
var errNotShown = fmt.Errorf("feishu: no live card: %w", channels.ErrNotShown)

// liveModes remembers, per workspace, the first mode a live reply tries.
type liveModes struct {
	mu    sync.Mutex
	modes map[string]liveMode
}

type liveMode struct {
	mode  string
	until time.Time
}

func (l *liveModes) get(workspace string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lm, ok := l.modes[workspace]; ok && time.Now().Before(lm.until) {
		return lm.mode
	}
	return modeCardKit
}

func (l *liveModes) set(workspace, mode string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.modes == nil || len(l.modes) > 1024 {
		l.modes = map[string]liveMode{}
	}
	l.modes[workspace] = liveMode{mode: mode, until: time.Now().Add(modeMemory)}
}

// StartReply implements channels.Streamer. Nothing is shown until the
// first progress. Where both live modes were refused lately, the reply is
// not streamed.
func (a *Adapter) StartReply(_ context.Context, m channels.Message) (channels.ReplySink, error) {
	mode := a.live.get(m.Workspace)
	if mode == modePost {
		return nil, nil
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return &cardSink{a: a, m: m, mode: mode, nonce: hex.EncodeToString(nonce[:])}, nil
}

// cardSink is one live reply. The gateway calls it from one goroutine.
type cardSink struct {
	a     *Adapter
	m     channels.Message
	mode  string
	nonce string // tells this reply's uuids from another's

	text   string // the answer so far (since the last reset)
	status string // the tool or skill at work, shown below the text
	shown  string // what the card shows
	// shownChars is how much of text the card shows (for coalesce).
	shownChars int
	msgID      string // the message showing the card ("" until sent)
	cardID     string // cardkit: the card entity
	seq        int    // cardkit: the last sequence used
	// created is when the card was sent (for an adopter's sequence, see
	// liveadopt.go).
	created time.Time
	last    time.Time
	broken  error // the card could not be updated; Finish repairs or removes it
}

// Unshown implements channels.Unshown: a reply whose card was never sent
// is posted by the gateway (Finish answers ErrNotShown).
func (s *cardSink) Unshown() bool { return s.msgID == "" }

// Show implements channels.ReplySink.
func (s *cardSink) Show(ctx context.Context, p channels.Progress) (bool, error) {
	switch p.Kind {
	case channels.ProgressText:
		s.text += p.Text
		s.status = ""
	case channels.ProgressReset:
		s.text, s.shownChars = "", 0
	case channels.ProgressTool:
		s.status = "Running " + p.Name + "…"
	case channels.ProgressSkill:
		s.status = "Using skill " + p.Name + "…"
	}
	if s.broken != nil {
		return true, s.broken
	}
	if s.coalesce(p) {
		return true, nil
	}
	body := s.render()
	if body == s.shown || (body == "" && s.msgID == "") {
		return s.msgID != "", nil
	}
	for {
		err := s.show(ctx, body)
		if err == nil {
			s.shown, s.shownChars = body, utf8.RuneCountInString(s.text)
			return true, nil
		}
		if ctx.Err() != nil {
			return s.msgID != "", err
		}
		if s.msgID != "" {
			// Shown, then failed midway: Finish repairs or removes it.
			s.broken = err
			s.a.log.Warn("live card update failed; the answer replaces it when complete", "mode", s.mode, "err", err)
			return true, err
		}
		if !s.fallback(err) {
			return false, err
		}
	}
}

// coalesce reports whether the card, already shown, skips this update:
// the text since the last is short, or came within feishu.stream_every
// of it. What is skipped stays in s.text for the next update or for
// Finish, so nothing is lost; only the Open API calls are fewer.
func (s *cardSink) coalesce(p channels.Progress) bool {
	if s.msgID == "" || p.Kind != channels.ProgressText {
		return false
	}
	every := s.a.cfg.StreamEvery
	if every <= 0 {
		every = DefaultStreamEvery
	}
	if time.Since(s.last) < every {
		return true
	}
	return utf8.RuneCountInString(s.text)-s.shownChars < s.a.opts.StreamMinChars
}

// render is what the card shows now: the text so far, cut to one card,
// and the work going on.
func (s *cardSink) render() string {
	text := strings.TrimSpace(s.text)
	if parts := channels.Split(text, s.a.opts.ChunkBytes); len(parts) > 1 {
		text = parts[0] + "\n\n…"
	}
	text = cardMarkdown(text)
	switch {
	case s.status == "":
	case text == "":
		text = "*" + s.status + "*"
	default:
		text += "\n\n*" + s.status + "*"
	}
	if text == "" && s.msgID != "" {
		text = "…" // withdrawn text leaves the card, not nothing
	}
	return text
}

// show makes the card or updates it to body, in the current mode.
func (s *cardSink) show(ctx context.Context, body string) error {
	switch {
	case s.mode == modeCardKit && s.msgID == "":
		return s.startCardKit(ctx, body)
	case s.mode == modeCardKit:
		return s.updateCardKit(ctx, body)
	case s.mode == modePatch && s.msgID == "":
		return s.startPatch(ctx, body)
	case s.mode == modePatch:
		return s.updatePatch(ctx, body)
	}
	return errNotShown
}

// fallback moves to the next mode after err refused the current one before
// anything was shown; false when none is left.
func (s *cardSink) fallback(err error) bool {
	next := modePatch
	if s.mode != modeCardKit {
		next = modePost
	}
	s.a.log.Warn("live reply mode refused; trying the next", "from", s.mode, "to", next, "err", err)
	s.a.m.ReplyStreamFallbacks.WithLabelValues(Name, s.mode, next).Inc()
	var apiErr *APIError
	if errors.As(err, &apiErr) && !apiErr.Retryable() {
		// Refused for good (a missing scope): start there next time.
		s.a.live.set(s.m.Workspace, next)
	}
	s.mode, s.cardID = next, ""
	return next != modePost
}

// pace waits until the card may be updated again: an interval after the
// previous call returned, so that the platform too sees the calls at
// least that far apart. The caller sets s.last when its call returns.
func (s *cardSink) pace(ctx context.Context) error {
	every := s.a.opts.CardUpdateInterval
	if s.mode == modePatch {
		every *= 2
	}
	if d := time.Until(s.last.Add(every)); d > 0 && !retry.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// streamingCard is a CardKit (JSON 2.0) card in streaming mode showing md.
func streamingCard(md string) map[string]any {
	return map[string]any{
		"schema": "2.0",
		"config": map[string]any{
			"update_multi":   true,
			"streaming_mode": true,
			"summary":        map[string]any{"content": "…"},
			"streaming_config": map[string]any{
				"print_frequency_ms": map[string]any{"default": 30},
				"print_step":         map[string]any{"default": 2},
				"print_strategy":     "fast",
			},
		},
		"body": map[string]any{"elements": []any{
			map[string]any{"tag": "markdown", "element_id": answerElement, "content": md},
		}},
	}
}

func (s *cardSink) startCardKit(ctx context.Context, body string) error {
	card, err := json.Marshal(streamingCard(body))
	if err != nil {
		return err
	}
	var out struct {
		Data struct {
			CardID string `json:"card_id"`
		} `json:"data"`
	}
	if err := s.a.call(ctx, "card_create", http.MethodPost, "/open-apis/cardkit/v1/cards", nil,
		map[string]string{"type": "card_json", "data": string(card)}, &out); err != nil {
		return err
	}
	if out.Data.CardID == "" {
		return missingField("card_create", "card_id")
	}
	content, err := json.Marshal(map[string]any{"type": "card", "data": map[string]string{"card_id": out.Data.CardID}})
	if err != nil {
		return err
	}
	if err := s.a.waitChat(ctx, s.m); err != nil {
		return err
	}
	id, err := s.a.postWith(ctx, s.a.calls, s.m, "interactive", string(content), s.uuid("card", 0))
	if err == nil && id == "" {
		err = missingField("send", "message_id")
	}
	if err != nil {
		return err
	}
	s.cardID, s.msgID, s.last, s.created = out.Data.CardID, id, time.Now(), time.Now()
	return nil
}

// uuid is the idempotency key of one call of this reply.
func (s *cardSink) uuid(kind string, seq int) string {
	return fmt.Sprintf("live-%s-%s-%d", s.nonce, kind, seq)
}

func (s *cardSink) updateCardKit(ctx context.Context, body string) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	defer func() { s.last = time.Now() }()
	s.seq++
	return s.a.call(ctx, "card_content", http.MethodPut, "/open-apis/cardkit/v1/cards/:card_id/elements/:element_id/content",
		map[string]string{"card_id": s.cardID, "element_id": answerElement}, map[string]any{"content": body, "sequence": s.seq, "uuid": s.uuid("content", s.seq)}, nil)
}

// closeCardKit ends streaming mode, leaving summary in the chat list.
func (s *cardSink) closeCardKit(ctx context.Context, summary string) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	defer func() { s.last = time.Now() }()
	settings, err := json.Marshal(map[string]any{"config": map[string]any{"streaming_mode": false, "summary": map[string]string{"content": summary}}})
	if err != nil {
		return err
	}
	s.seq++
	return s.a.call(ctx, "card_settings", http.MethodPatch, "/open-apis/cardkit/v1/cards/:card_id/settings",
		map[string]string{"card_id": s.cardID}, map[string]any{"settings": string(settings), "sequence": s.seq, "uuid": s.uuid("settings", s.seq)}, nil)
}

// sharedCard is an interactive card that can be edited after it is sent.
func sharedCard(md string) ([]byte, error) {
	card := cardFor(md)
	card["config"] = map[string]any{"wide_screen_mode": true, "update_multi": true}
	return json.Marshal(card)
}

func (s *cardSink) startPatch(ctx context.Context, body string) error {
	card, err := sharedCard(body)
	if err != nil {
		return err
	}
	if err := s.a.waitChat(ctx, s.m); err != nil {
		return err
	}
	id, err := s.a.postWith(ctx, s.a.calls, s.m, "interactive", string(card), s.uuid("patch", 0))
	if err == nil && id == "" {
		// Without its id the card cannot be patched: each update would
		// post another.
		err = missingField("send", "message_id")
	}
	if err != nil {
		return err
	}
	s.msgID, s.last, s.created = id, time.Now(), time.Now()
	return nil
}

func (s *cardSink) updatePatch(ctx context.Context, body string) error {
	if err := s.pace(ctx); err != nil {
		return err
	}
	defer func() { s.last = time.Now() }()
	card, err := sharedCard(body)
	if err != nil {
		return err
	}
	return s.a.call(ctx, "patch", http.MethodPatch, "/open-apis/im/v1/messages/:message_id",
		map[string]string{"message_id": s.msgID}, map[string]any{"content": string(card)}, nil)
}

// summary is the first words of the answer, for the chat list.
func summary(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) <= summaryRunes {
		return text
	}
	r := []rune(text)
	return string(r[:summaryRunes-1]) + "…"
}

// Finish implements channels.ReplySink: the card is completed with the
// answer's first part and the rest is sent as Send sends it. A card that
// cannot be completed is removed and an error returned, so the gateway
// posts the whole answer instead: the user never keeps a partial answer
// beside the complete one.
func (s *cardSink) Finish(ctx context.Context, r channels.Reply) error {
	if s.msgID == "" {
		return errNotShown
	}
	parts := channels.Split(r.Text, s.a.opts.ChunkBytes)
	if len(parts) == 0 {
		return s.remove(ctx, errors.New("feishu: an empty answer"))
	}
	final := cardMarkdown(parts[0])
	var err error
	switch s.mode {
	case modeCardKit:
		if final != s.shown || s.broken != nil {
			err = s.updateCardKit(ctx, final)
		}
		if err == nil {
			if cerr := s.closeCardKit(ctx, summary(parts[0])); cerr != nil {
				// The answer is shown in full; Feishu ends streaming by
				// itself after a while.
				s.a.log.Warn("cannot close the live card's streaming mode", "err", cerr)
			}
		}
	case modePatch:
		if final != s.shown || s.broken != nil {
			err = s.updatePatch(ctx, final)
		}
	}
	if err != nil {
		return s.remove(ctx, err)
	}
	for i := 1; i < len(parts); i++ {
		if err := s.a.sendChunk(ctx, s.m, i, parts[i]); err != nil {
			// The parts already sent are dropped by Feishu (their uuid)
			// when the gateway posts the whole answer.
			return s.remove(ctx, fmt.Errorf("feishu: part %d of %d: %w", i+1, len(parts), err))
		}
	}
	s.a.markAnswered(ctx, s.m, r)
	return nil
}

// remove recalls the card after why kept it from being completed, and
// reports why: the gateway then posts the answer.
func (s *cardSink) remove(ctx context.Context, why error) error {
	s.a.m.ReplyStreamFallbacks.WithLabelValues(Name, s.mode, modePost).Inc()
	if err := s.recall(ctx); err != nil {
		s.a.log.Warn("cannot remove the unfinished live card; the answer is posted beside it", "err", err)
	}
	return fmt.Errorf("feishu: live card not completed: %w", why)
}

// recall deletes the message showing the card.
func (s *cardSink) recall(ctx context.Context) error {
	if s.msgID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := s.a.call(ctx, "delete", http.MethodDelete, "/open-apis/im/v1/messages/:message_id",
		map[string]string{"message_id": s.msgID}, nil, nil)
	if err == nil {
		s.msgID = ""
	}
	return err
}

// Discard implements channels.ReplySink: the card, if any, is recalled.
func (s *cardSink) Discard(ctx context.Context) error {
	return s.recall(ctx)
}
