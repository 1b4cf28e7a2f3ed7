package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// A live reply on Slack (channels.Streamer) is shown in the richest way
// the workspace allows:
//
//   - stream: Slack's native streaming, in the thread of the message
//     (chat.startStream with the asking user and team as recipients, then
//     chat.appendStream, then chat.stopStream), in markdown. A streamed
//     message holds at most MaxStreamChars; a longer answer rolls over
//     into a new streamed message. While tools run, the thread's status
//     line (assistant.threads.setStatus) says "is thinking…" or names
//     the tool.
//   - update: one chat.postMessage with the text so far, edited with
//     chat.update at most once per Options.UpdateEvery (default 1 s).
//   - post: no live reply; the answer is posted when complete, through
//     the gateway's paced and resumable delivery (the outbox).
//
// A workspace starts at stream. When Slack refuses a mode for good (the
// method is unknown, not allowed, lacks a scope, or the token type is
// wrong) the workspace moves down to the next and stays there for
// RefusalMemory (an hour) in this process; every replica learns it on its
// own, at the cost of one refused call. A failure that may pass (5xx, a rate limit) moves only the
// reply at hand. Each move is counted in parley_reply_stream_fallbacks_total.
//
// Whatever happens midway, the user is left with the answer exactly once:
// a stream that cannot be completed is edited to the final text when it
// is one message, or else deleted, and the answer is then posted plainly
// by the gateway (Finish returns an error only once nothing of the reply
// remains shown). A stream is always a reply in a thread; a top-level
// answer (a DM outside a thread) starts at update.
type replyMode int

const (
	modeStream replyMode = iota // chat.startStream / appendStream / stopStream
	modeUpdate                  // one chat.postMessage, then chat.update at most once a second
	modePost                    // no live reply: the answer is posted when complete
)

func (m replyMode) String() string {
	switch m {
	case modeStream:
		return "stream"
	case modeUpdate:
		return "update"
	}
	return "post"
}

// MaxStreamChars is the most characters of markdown one streamed message
// holds (Slack's limit for markdown_text).
const MaxStreamChars = 12000

// maxLiveChars bounds the text streamed while the answer is written; the
// rest is shown when the answer is complete. It stays under the reply cap
// (limits.reply_chars, limits.reply_posts), so that a runaway answer is
// cut before it is shown rather than after.
const maxLiveChars = 2 * MaxStreamChars

// Defaults of the live reply's Options.
const (
	DefaultUpdateEvery = time.Second
	DefaultAppendEvery = time.Second
	liveCallTimeout    = 10 * time.Second
)

// Status lines of a thread while its answer is written.
const (
	StatusThinking = "is thinking…"
	statusTool     = "is running %s…"
	statusSkill    = "is reading the skill %s…"
)

// fallbacks are the moves a live reply can make, primed at zero so that
// the first shows as an increase.
var fallbacks = [][2]replyMode{{modeStream, modeUpdate}, {modeStream, modePost}, {modeUpdate, modePost}}

// primeFallbacks creates the parley_reply_stream_fallbacks_total series
// of Slack at zero.
func (a *Adapter) primeFallbacks() {
	for _, f := range fallbacks {
		a.m.ReplyStreamFallbacks.WithLabelValues(Name, f[0].String(), f[1].String())
	}
}

// refusedForGood are the error codes with which a workspace refuses a
// method it does not offer this app: asking again cannot help.
var refusedForGood = map[string]bool{
	"unknown_method": true, "not_allowed": true, "missing_scope": true, "not_allowed_token_type": true,
	"method_deprecated": true, "no_permission": true, "feature_not_enabled": true, "access_denied": true,
	"team_access_not_granted": true, "restricted_action": true, "cant_update_message": true,
	"edit_window_closed": true, "cant_delete_message": true, codeMissingField: true,
}

// codeMissingField is the code of an ok answer that lacks the field Parley
// needs of it (a ts): a method that answers so cannot be used, and counts
// as refused, so the reply takes the documented fallback.
const codeMissingField = "missing_field"

// missingField is the error of an ok answer without field.
func missingField(field string) error {
	return fmt.Errorf("answered ok without its %s: %w", field, slackapi.SlackErrorResponse{Err: codeMissingField})
}

// refused reports whether err is a refusal for good.
func refused(err error) bool { return refusedForGood[errorCode(err)] }

// RefusalMemory is how long a workspace's refusal of a way of showing
// live replies is remembered: long enough not to ask at every answer,
// short enough that a workspace granted the scope later gets it back
// without a restart.
const RefusalMemory = time.Hour

// remembered is a value kept until a time.
type remembered[T any] struct {
	v     T
	until time.Time
}

// replyMode is the mode the workspace's replies start in.
func (a *Adapter) replyMode(workspace string) replyMode {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.modes[workspace]
	if !ok || !a.opts.Now().Before(r.until) {
		delete(a.modes, workspace)
		return modeStream
	}
	return r.v
}

// downgrade remembers that the workspace refuses from, and counts the move
// of the reply at hand.
func (a *Adapter) downgrade(workspace string, from, to replyMode, remember bool, err error) {
	a.fallback(from, to)
	if !remember {
		a.log.Warn("live reply falls back for this answer", "from", from.String(), "to", to.String(), "err", err)
		return
	}
	now := a.opts.Now()
	a.mu.Lock()
	if a.modes == nil {
		a.modes = map[string]remembered[replyMode]{}
	}
	cur, ok := a.modes[workspace]
	changed := !ok || !now.Before(cur.until) || cur.v < to
	if changed {
		a.modes[workspace] = remembered[replyMode]{v: to, until: now.Add(RefusalMemory)}
	}
	a.mu.Unlock()
	if changed {
		a.log.Warn("workspace refuses a way of showing live replies; its replies use the next for an hour",
			"team", workspace, "refused", from.String(), "now", to.String(), "err", err)
	}
}

// fallback counts one move of a reply.
func (a *Adapter) fallback(from, to replyMode) {
	a.m.ReplyStreamFallbacks.WithLabelValues(Name, from.String(), to.String()).Inc()
}

// statusRefused reports whether the workspace refused setStatus lately.
func (a *Adapter) statusRefused(workspace string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.noStatus[workspace]
	return ok && a.opts.Now().Before(r.until)
}

func (a *Adapter) refuseStatus(workspace string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.noStatus == nil {
		a.noStatus = map[string]remembered[bool]{}
	}
	a.noStatus[workspace] = remembered[bool]{v: true, until: a.opts.Now().Add(RefusalMemory)}
}

// StartReply implements channels.Streamer. A slash command's answer (an
// ephemeral post to its response_url) is not streamed, nor is any answer
// in a workspace that refused both stream and update.
func (a *Adapter) StartReply(ctx context.Context, m channels.Message) (channels.ReplySink, error) {
	if a.opts.NoLiveReplies || m.Chat == "" || m.Meta[MetaResponseURL] != "" {
		return nil, nil
	}
	s := &liveSink{a: a, m: m, mode: a.replyMode(m.Workspace), thread: m.Meta[MetaThreadTS], id: newDeliveryID()}
	if s.mode == modeStream && (s.thread == "" || m.User == "") {
		s.mode = modeUpdate
	}
	if s.mode == modePost {
		return nil, nil
	}
	// No status yet: the gateway says when the turn outlasts its typing
	// delay (ProgressWaiting), and a faster answer is one post, no more.
	return s, nil
}

// streamed is one message of a streamed reply.
type streamed struct {
	ts    string
	chars int  // characters streamed into it
	open  bool // not stopped yet
}

// liveSink shows one answer in a Slack thread.
type liveSink struct {
	a      *Adapter
	m      channels.Message
	mode   replyMode
	thread string
	id     string // the reply's delivery id, in its messages' metadata
	starts int    // stream: chat.startStream calls made, for each message's key

	// The text since the last reset: shown (as sent, mentions
	// neutralised) and pending (received, not shown yet: paced, or held
	// past maxLiveChars).
	shown   strings.Builder
	pending string
	last    time.Time // the last call that showed text

	msgs   []streamed // stream: this reply's messages since the last reset
	broken bool       // stream: a call failed; Finish repairs

	ts      string // update: the message edited
	posted  string // update: its text as last posted or edited
	visible bool   // something of the reply was shown
	// adopted: another process showed the reply (AdoptReply); a refusal
	// to edit its message says nothing of the workspace's modes.
	adopted bool
}

// key is the delivery id of one message of the reply: kind "u" the
// edited message, "sN" the N-th streamed one.
func (s *liveSink) key(kind string) string { return s.id + "." + kind }

// Show implements channels.ReplySink.
func (s *liveSink) Show(ctx context.Context, p channels.Progress) (bool, error) {
	switch p.Kind {
	case channels.ProgressText:
		s.pending += p.Text
		return s.flush(ctx)
	case channels.ProgressReset:
		return false, s.reset(ctx)
	case channels.ProgressTool:
		return s.setStatus(ctx, fmt.Sprintf(statusTool, p.Name)), nil
	case channels.ProgressSkill:
		return s.setStatus(ctx, fmt.Sprintf(statusSkill, p.Name)), nil
	case channels.ProgressWaiting:
		return s.setStatus(ctx, StatusThinking), nil
	}
	return false, nil
}

// setStatus sets the thread's status line, once the workspace has not
// refused it; it reports whether the status shows.
func (s *liveSink) setStatus(ctx context.Context, status string) bool {
	if s.thread == "" || s.a.statusRefused(s.m.Workspace) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	err := s.a.call(ctx, "assistant.threads.setStatus", 1, func(ctx context.Context) error {
		return s.a.api.SetAssistantThreadsStatusContext(ctx, slackapi.AssistantThreadsSetStatusParameters{
			ChannelID: s.m.Chat, ThreadTS: s.thread, Status: status,
		})
	})
	if err != nil {
		// The status line is a courtesy: any refusal that is not a
		// passing failure (a scope, a channel kind that has none) ends
		// asking for it in this workspace.
		if f := classify(err); !f.retry && ctx.Err() == nil {
			s.a.refuseStatus(s.m.Workspace)
		}
		return false
	}
	return true
}

// flush shows the pending text when the pace allows.
func (s *liveSink) flush(ctx context.Context) (bool, error) {
	if s.pending == "" {
		return false, nil
	}
	if s.mode == modeStream {
		if s.broken {
			return false, nil
		}
		if len(s.msgs) > 0 && time.Since(s.last) < s.a.opts.AppendEvery {
			return false, nil
		}
		room := maxLiveChars - utf8.RuneCountInString(s.shown.String())
		text, rest := s.pending, ""
		if utf8.RuneCountInString(text) > room {
			cut := runeOffset(text, max(room, 0))
			text, rest = text[:cut], text[cut:]
		}
		if strings.HasSuffix(text, "<") { // it may open a mention: wait for the next character
			text, rest = text[:len(text)-1], "<"+rest
		}
		if text == "" {
			return false, nil
		}
		if err := s.stream(ctx, s.a.neutral(text), false); err != nil {
			if s.mode == modeStream {
				s.broken = true
				return s.visible, err
			}
			// Refused at the start: the reply goes on as one edited message.
			return s.flushUpdate(ctx)
		}
		s.pending = rest
		return true, nil
	}
	return s.flushUpdate(ctx)
}

// flushUpdate posts or edits the message with the text so far.
func (s *liveSink) flushUpdate(ctx context.Context) (bool, error) {
	if s.mode != modeUpdate {
		return false, nil
	}
	if s.ts != "" && time.Since(s.last) < s.a.opts.UpdateEvery {
		return false, nil
	}
	parts := s.a.Parts(s.m, channels.Reply{Text: s.shown.String() + s.pending})
	if len(parts) == 0 || parts[0] == s.posted {
		return false, nil
	}
	if err := s.edit(ctx, parts[0]); err != nil {
		if refused(err) {
			s.a.downgrade(s.m.Workspace, modeUpdate, modePost, true, err)
			s.mode = modePost
		}
		return s.visible, err
	}
	s.shown.WriteString(s.pending)
	s.pending = ""
	return true, nil
}

// edit posts text as the reply's message, or edits the message to it.
func (s *liveSink) edit(ctx context.Context, text string) error {
	ctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	var err error
	if s.ts == "" {
		if err := s.a.waitChat(ctx, s.m); err != nil {
			return err
		}
		key := s.key("u")
		s.ts, err = s.a.writeOnce(ctx, postMethod(s.m), 2, s.m, key, false, func(ctx context.Context) (string, error) {
			ts, err := s.a.postText(ctx, s.m, text, key)
			if err == nil && ts == "" {
				// Without its ts the message cannot be edited: each edit
				// would post it again.
				err = missingField("ts")
			}
			return ts, err
		})
	} else {
		err = s.a.call(ctx, "chat.update", 2, func(ctx context.Context) error {
			_, _, _, err := s.a.api.UpdateMessageContext(ctx, s.m.Chat, s.ts,
				slackapi.MsgOptionText(text, false), slackapi.MsgOptionDisableLinkUnfurl())
			return err
		})
	}
	s.last = time.Now()
	if err != nil {
		return fmt.Errorf("slack: live reply: %w", err)
	}
	s.posted, s.visible = text, true
	return nil
}

// neutral keeps model text from forming a Slack mention or broadcast in a
// streamed message, unless slack.allow_mentions is set: a zero-width space
// after the "<" of "<!", "<@" and "<#" leaves the text as it reads.
func (a *Adapter) neutral(text string) string {
	if a.cfg.AllowMentions {
		return text
	}
	return mentionBreaker.Replace(text)
}

var mentionBreaker = strings.NewReplacer("<!", "<\u200b!", "<@", "<\u200b@", "<#", "<\u200b#")

// runeOffset is the byte offset of the n-th character of s.
func runeOffset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

// errEmpty is an answer with nothing to show.
var errEmpty = errors.New("slack: live reply: empty answer")
