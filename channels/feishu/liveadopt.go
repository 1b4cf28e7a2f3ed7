package feishu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/channels"
)

// A live card's process may die mid-answer. Its sink names what it shows
// (channels.Referenced): the chat, the mode, the message and, in cardkit,
// the card entity with the time it was made; the gateway records that
// with the turn, and the process that takes the conversation over adopts
// the card (channels.LiveAdopter) and finishes it as its own: the card is
// updated to the whole answer (and its streaming closed), or, when Feishu
// refuses that, recalled and the answer posted once.
//
// A CardKit card takes only increasing sequence numbers, and the one the
// other process reached is not known: its updates were at least a
// millisecond apart (CardUpdateInterval paces them), so a sequence of one
// per millisecond since the card was made, plus an hour for clocks that
// disagree, is past any it used.

var (
	_ channels.Referenced  = (*cardSink)(nil)
	_ channels.LiveAdopter = (*Adapter)(nil)
)

// liveRef is what a reference holds.
type liveRef struct {
	Chat string `json:"chat"`
	Mode string `json:"mode"` // modeCardKit or modePatch
	Msg  string `json:"msg"`
	Card string `json:"card,omitempty"` // cardkit
	At   int64  `json:"at,omitempty"`   // cardkit: when the card was made, Unix ms
}

const (
	// maxRefBytes bounds a reference read back.
	maxRefBytes = 1 << 10
	// seqSkew is the sequence margin for clocks that disagree: an hour of
	// milliseconds.
	seqSkew = int64(time.Hour / time.Millisecond)
	// maxSeq is the largest sequence Feishu takes (an int32).
	maxSeq = 1<<31 - 1
)

// isID reports whether s has the form of a Feishu message or card id: 1
// to 128 of keyChars.
func isID(s string) bool { return keyChars.Match(s, 1, 128) }

// Reference implements channels.Referenced. It changes when the card is
// sent, not with its updates.
func (s *cardSink) Reference() string {
	if s.msgID == "" {
		return ""
	}
	ref := liveRef{Chat: s.m.Chat, Mode: s.mode, Msg: s.msgID}
	if s.mode == modeCardKit {
		ref.Card, ref.At = s.cardID, s.created.UnixMilli()
	}
	b, err := json.Marshal(ref)
	if err != nil {
		return ""
	}
	return string(b)
}

// errForeignRef is AdoptReply's answer to a reference it cannot have made.
var errForeignRef = errors.New("feishu: not a live card of this chat")

// AdoptReply implements channels.LiveAdopter.
func (a *Adapter) AdoptReply(_ context.Context, m channels.Message, ref string) (channels.ReplySink, error) {
	if len(ref) > maxRefBytes {
		return nil, fmt.Errorf("%w: a reference of %d bytes", errForeignRef, len(ref))
	}
	var r liveRef
	if err := json.Unmarshal([]byte(ref), &r); err != nil {
		return nil, fmt.Errorf("%w: %w", errForeignRef, err)
	}
	if r.Chat == "" || r.Chat != m.Chat || !isID(r.Msg) {
		return nil, errForeignRef
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	s := &cardSink{a: a, m: m, mode: r.Mode, nonce: hex.EncodeToString(nonce[:]), msgID: r.Msg}
	switch r.Mode {
	case modePatch:
	case modeCardKit:
		if !isID(r.Card) || r.At <= 0 {
			return nil, errForeignRef
		}
		s.cardID = r.Card
		s.seq = int(min(max(time.Since(time.UnixMilli(r.At)).Milliseconds(), 0)+seqSkew, maxSeq-2))
	default:
		return nil, errForeignRef
	}
	return s, nil
}
