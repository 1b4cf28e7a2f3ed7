package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// A live reply's process may die mid-answer. Its sink names what it shows
// (channels.Referenced): the chat, the mode and the ts of each message;
// the gateway records that with the turn, and the process that takes the
// conversation over adopts the reply (channels.LiveAdopter) and finishes
// it as a sink whose stream broke would: a stream left open is stopped,
// and one message is edited to the whole answer (chat.update); more
// messages, an answer longer than one post, or an edit Slack refuses have
// every message deleted (chat.delete), and the answer is posted once.

var (
	_ channels.Referenced  = (*liveSink)(nil)
	_ channels.LiveAdopter = (*Adapter)(nil)
)

// liveRef is what a reference holds.
type liveRef struct {
	Chat string   `json:"chat"`
	Mode string   `json:"mode"` // "stream" or "update"
	TS   []string `json:"ts"`
}

// maxRefMessages bounds the messages one reference names: a streamed
// reply holds at most maxLiveChars, in messages of MaxStreamChars.
const maxRefMessages = maxLiveChars/MaxStreamChars + 1

// maxRefBytes bounds a reference read back.
const maxRefBytes = 1 << 10

// digits are the bytes of either part of a Slack message ts.
var digits = ident.Of("0-9")

// isTS reports whether ts has the form of a Slack message ts, 1 to 12
// digits, a dot and 1 to 9 digits: a reference or a room cursor that is
// not one is refused.
func isTS(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	return ok && digits.Match(sec, 1, 12) && digits.Match(frac, 1, 9)
}

// Reference implements channels.Referenced.
func (s *liveSink) Reference() string {
	ref := liveRef{Chat: s.m.Chat, Mode: s.mode.String()}
	switch s.mode {
	case modeStream:
		for _, m := range s.msgs {
			ref.TS = append(ref.TS, m.ts)
		}
	case modeUpdate:
		if s.ts != "" {
			ref.TS = []string{s.ts}
		}
	}
	if len(ref.TS) == 0 {
		return ""
	}
	b, err := json.Marshal(ref)
	if err != nil {
		return ""
	}
	return string(b)
}

// errForeignRef is AdoptReply's answer to a reference it cannot have made.
var errForeignRef = errors.New("slack: not a live reply of this chat")

// AdoptReply implements channels.LiveAdopter.
func (a *Adapter) AdoptReply(_ context.Context, m channels.Message, ref string) (channels.ReplySink, error) {
	if len(ref) > maxRefBytes {
		return nil, fmt.Errorf("%w: a reference of %d bytes", errForeignRef, len(ref))
	}
	var r liveRef
	if err := json.Unmarshal([]byte(ref), &r); err != nil {
		return nil, fmt.Errorf("%w: %w", errForeignRef, err)
	}
	if r.Chat == "" || r.Chat != m.Chat || len(r.TS) == 0 || len(r.TS) > maxRefMessages {
		return nil, errForeignRef
	}
	for _, ts := range r.TS {
		if !isTS(ts) {
			return nil, errForeignRef
		}
	}
	s := &liveSink{a: a, m: m, thread: m.Meta[MetaThreadTS], id: newDeliveryID(), visible: true, adopted: true}
	switch r.Mode {
	case modeStream.String():
		// broken: Finish repairs (stop, then edit or delete), since
		// nothing says how far the other process got.
		s.mode, s.broken = modeStream, true
		for _, ts := range r.TS {
			s.msgs = append(s.msgs, streamed{ts: ts, open: true})
		}
	case modeUpdate.String():
		if len(r.TS) != 1 {
			return nil, errForeignRef
		}
		s.mode, s.ts = modeUpdate, r.TS[0]
	default:
		return nil, errForeignRef
	}
	return s, nil
}
