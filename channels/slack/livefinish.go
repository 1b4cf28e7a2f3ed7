package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// stream shows text (already neutralised) in the reply's streamed
// messages: appended to the open one, rolling over into a new one past
// MaxStreamChars; stop ends the last. A refusal of the reply's first
// chat.startStream moves the sink to update (nothing was shown); any other
// failure leaves what was shown in s.msgs for Finish to repair.
func (s *liveSink) stream(ctx context.Context, text string, stop bool) error {
	ctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	for {
		var cur *streamed
		if n := len(s.msgs); n > 0 && s.msgs[n-1].open {
			cur = &s.msgs[n-1]
		}
		room := MaxStreamChars
		if cur != nil {
			room -= cur.chars
		}
		piece, rest := cutForStream(text, room)
		last := rest == ""
		var err error
		switch {
		case cur == nil:
			var ts string
			if ts, err = s.startStream(ctx, piece); err != nil {
				return err
			}
			s.msgs = append(s.msgs, streamed{ts: ts, open: true})
			cur = &s.msgs[len(s.msgs)-1]
			if !last || stop {
				err = s.stopStream(ctx, cur, "")
			}
		case !last || stop:
			err = s.stopStream(ctx, cur, piece)
		case piece != "":
			err = s.appendStream(ctx, cur, piece)
		}
		if err != nil {
			return err
		}
		cur.chars += utf8.RuneCountInString(piece)
		s.shown.WriteString(piece)
		s.last, s.visible = time.Now(), true
		if last {
			return nil
		}
		text = rest
	}
}

// cutForStream cuts off what of text fits in room characters, at a line
// break in its second half when there is one.
func cutForStream(text string, room int) (piece, rest string) {
	if utf8.RuneCountInString(text) <= room {
		return text, ""
	}
	cut := runeOffset(text, max(room, 0))
	if i := strings.LastIndexByte(text[:cut], '\n'); i >= 0 && i >= cut/2 {
		cut = i + 1
	}
	return text[:cut], text[cut:]
}

func (s *liveSink) startStream(ctx context.Context, piece string) (string, error) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionTS(s.thread),
		slackapi.MsgOptionRecipientUserID(s.m.User), slackapi.MsgOptionRecipientTeamID(s.m.Workspace)}
	if piece != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(piece))
	}
	if err := s.a.waitChat(ctx, s.m); err != nil {
		return "", err
	}
	// A stream Slack started without its answer reaching Parley is found
	// in the thread by its key and goes on (once.go).
	key := s.key("s" + strconv.Itoa(s.starts))
	s.starts++
	opts = append(opts, slackapi.MsgOptionMetadata(slackapi.SlackMetadata{EventType: MetadataEventType,
		EventPayload: map[string]any{"delivery_id": key}}))
	ts, err := s.a.writeOnce(ctx, "chat.startStream", 2, s.m, key, false, func(ctx context.Context) (string, error) {
		_, ts, err := s.a.api.StartStreamContext(ctx, s.m.Chat, opts...)
		if err == nil && ts == "" {
			err = missingField("ts")
		}
		return ts, err
	})
	if err != nil {
		if len(s.msgs) == 0 && s.shown.Len() == 0 && !s.broken {
			// Nothing of the reply is shown: it goes on as one edited
			// message, and the workspace does so from now on if it refused.
			s.a.downgrade(s.m.Workspace, modeStream, modeUpdate, refused(err), err)
			s.mode = modeUpdate
		}
		return "", fmt.Errorf("slack: live reply: %w", err)
	}
	return ts, nil
}

func (s *liveSink) appendStream(ctx context.Context, cur *streamed, piece string) error {
	err := s.a.call(ctx, "chat.appendStream", 2, func(ctx context.Context) error {
		_, _, err := s.a.api.AppendStreamContext(ctx, s.m.Chat, cur.ts, slackapi.MsgOptionMarkdownText(piece))
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: live reply: %w", err)
	}
	return nil
}

func (s *liveSink) stopStream(ctx context.Context, cur *streamed, piece string) error {
	var opts []slackapi.MsgOption
	if piece != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(piece))
	}
	err := s.a.call(ctx, "chat.stopStream", 2, func(ctx context.Context) error {
		_, _, err := s.a.api.StopStreamContext(ctx, s.m.Chat, cur.ts, opts...)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: live reply: %w", err)
	}
	cur.open = false
	return nil
}

// reset withdraws the text shown since the last reset: a streamed message
// cannot take text back, so it is ended and deleted; the edited message
// keeps its text until the next edit replaces it.
func (s *liveSink) reset(ctx context.Context) error {
	s.shown.Reset()
	s.pending = ""
	if s.mode != modeStream {
		return nil
	}
	err := s.removeStreams(ctx)
	s.broken = false
	if err != nil {
		s.a.log.Warn("a withdrawn live reply stays shown", "err", err)
	}
	return nil
}

// Finish implements channels.ReplySink.
func (s *liveSink) Finish(ctx context.Context, r channels.Reply) error {
	if strings.TrimSpace(r.Text) == "" {
		return errors.Join(errEmpty, s.Discard(ctx))
	}
	if s.Unshown() {
		// Nothing shown: one post (the gateway's) rather than a stream
		// started and stopped at once.
		return fmt.Errorf("slack: live reply: %w", channels.ErrNotShown)
	}
	if s.mode == modeStream && !s.broken {
		if rest, ok := strings.CutPrefix(s.a.neutral(r.Text), s.shown.String()); ok {
			err := s.stream(ctx, rest, true)
			if err == nil {
				return nil
			}
			s.broken = s.mode == modeStream
		}
	}
	switch s.mode {
	case modeStream:
		return s.repair(ctx, r)
	case modeUpdate:
		return s.finishUpdate(ctx, r)
	}
	return s.remove(ctx, errors.New("slack: live reply: the workspace refused edits"))
}

// repair leaves the user with r where a stream could not be completed:
// one streamed message is stopped and edited to r; more (or an edit that
// fails) are deleted, and the gateway posts r.
func (s *liveSink) repair(ctx context.Context, r channels.Reply) error {
	ctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	for i := range s.msgs {
		if s.msgs[i].open {
			_ = s.stopStream(ctx, &s.msgs[i], "") // edited or deleted next either way
		}
	}
	parts := s.a.Parts(s.m, r)
	why := errors.New("slack: live reply: the stream could not be completed")
	if len(s.msgs) == 1 && len(parts) == 1 {
		err := s.a.call(ctx, "chat.update", 2, func(ctx context.Context) error {
			_, _, _, err := s.a.api.UpdateMessageContext(ctx, s.m.Chat, s.msgs[0].ts,
				slackapi.MsgOptionText(parts[0], false), slackapi.MsgOptionDisableLinkUnfurl())
			return err
		})
		if err == nil {
			s.a.fallback(modeStream, modeUpdate)
			return nil
		}
		why = fmt.Errorf("slack: live reply: %w", err)
	}
	s.a.fallback(modeStream, modePost)
	return s.remove(ctx, why)
}

// Unshown implements channels.Unshown: a reply that has shown nothing
// yet, streamed or edited into place, is posted by the gateway.
func (s *liveSink) Unshown() bool { return s.ts == "" && len(s.msgs) == 0 }

// finishUpdate edits the message to r when r is one post; a longer r, or
// an edit that fails, has the message deleted and r posted by the gateway.
func (s *liveSink) finishUpdate(ctx context.Context, r channels.Reply) error {
	if s.ts == "" {
		return fmt.Errorf("slack: live reply: %w", channels.ErrNotShown)
	}
	parts := s.a.Parts(s.m, r)
	why := errors.New("slack: live reply: the answer takes more than one post")
	if len(parts) == 1 {
		if parts[0] == s.posted {
			return nil
		}
		if err := sleep(ctx, s.a.opts.UpdateEvery-time.Since(s.last)); err != nil {
			return s.remove(context.WithoutCancel(ctx), err)
		}
		err := s.edit(ctx, parts[0])
		if err == nil {
			return nil
		}
		if refused(err) && !s.adopted {
			s.a.downgrade(s.m.Workspace, modeUpdate, modePost, true, err)
			return s.remove(ctx, err)
		}
		why = err
	}
	s.a.fallback(modeUpdate, modePost)
	return s.remove(ctx, why)
}

// Discard implements channels.ReplySink: every message of the reply is
// deleted.
func (s *liveSink) Discard(ctx context.Context) error {
	if s.mode == modeStream {
		return s.removeStreams(ctx)
	}
	return s.removeEdited(ctx)
}

// remove deletes whatever the reply showed and returns why, the reason the
// gateway is to post the answer itself. A message that could not be
// deleted is logged: the answer is still posted, beside it.
func (s *liveSink) remove(ctx context.Context, why error) error {
	err := s.removeStreams(ctx)
	err = errors.Join(err, s.removeEdited(ctx))
	if err != nil {
		s.a.log.Warn("a live reply could not be removed before the answer is posted", "err", err)
	}
	return why
}

// removeStreams ends and deletes the streamed messages.
func (s *liveSink) removeStreams(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveCallTimeout)
	defer cancel()
	var errs []error
	for i := range s.msgs {
		if s.msgs[i].open {
			_ = s.stopStream(ctx, &s.msgs[i], "")
		}
		errs = append(errs, s.delete(ctx, s.msgs[i].ts))
	}
	s.msgs = nil
	return errors.Join(errs...)
}

// removeEdited deletes the edited message.
func (s *liveSink) removeEdited(ctx context.Context) error {
	if s.ts == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveCallTimeout)
	defer cancel()
	err := s.delete(ctx, s.ts)
	s.ts, s.posted = "", ""
	return err
}

func (s *liveSink) delete(ctx context.Context, ts string) error {
	return s.a.call(ctx, "chat.delete", 2, func(ctx context.Context) error {
		_, _, err := s.a.api.DeleteMessageContext(ctx, s.m.Chat, ts)
		if errorCode(err) == "message_not_found" {
			return nil
		}
		return err
	})
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
