package channels

import (
	"context"
	"errors"
)

// A reply can be shown while it is being written: an adapter whose platform
// can edit or stream a message implements Streamer, and the gateway feeds
// the ReplySink it returns with the turn's progress, then hands it the
// final reply. An adapter without it is sent the final reply alone, as
// before.
//
// The contract every sink keeps, whatever its platform:
//
//   - the user sees progress soon after the first token (within about a
//     second), so a sink shows text as it comes rather than waiting for
//     the end;
//   - the final text the user is left with is exactly the reply's Text,
//     the answer as stored, in the form Send would give it;
//   - it is delivered exactly once: never a partial message beside a
//     complete one, never the same answer twice;
//   - a failure midway (the platform refuses an edit, a stream expires)
//     does not lose the reply: Finish falls back to a plain post of the
//     final text, after editing or deleting what was shown so that
//     nothing stays duplicated.
//
// Notices (refusals, apologies, command results) are never streamed: the
// gateway Discards the sink and posts them with Send.

// ProgressKind says what a Progress reports.
type ProgressKind int

const (
	// ProgressText: Text follows the text shown since the last reset.
	ProgressText ProgressKind = iota + 1
	// ProgressTool: the tool Name is running.
	ProgressTool
	// ProgressSkill: the skill Name was loaded.
	ProgressSkill
	// ProgressReset: the text shown since the last reset is withdrawn; the
	// text that follows starts anew.
	ProgressReset
	// ProgressWaiting: the turn has run past the gateway's typing delay
	// with nothing to show yet; a sink may show that it is at work (a
	// status line). Nothing is shown before it: an answer complete by
	// then is posted whole instead.
	ProgressWaiting
)

// Progress is one step of a reply being written.
type Progress struct {
	Kind ProgressKind
	Text string // ProgressText
	Name string // ProgressTool, ProgressSkill
}

// Streamer is implemented by adapters that can show a reply while it is
// being written (a message they edit or stream to).
type Streamer interface {
	// StartReply prepares the live reply to m. It may show nothing yet. A
	// nil sink with a nil error means this reply is not streamed (the
	// conversation cannot be, or another process answers it); the final
	// reply then goes through Send.
	StartReply(ctx context.Context, m Message) (ReplySink, error)
}

// ErrNotShown is Finish's answer when nothing of the reply was shown, so
// there is nothing to finish: the gateway sends the reply as it would
// have without a live reply. Not a failure — a model that answers in one
// piece shows nothing before it is done.
var ErrNotShown = errors.New("nothing of the live reply was shown; the answer is posted")

// Unshown is a ReplySink that can say, between its last Show and Finish,
// that nothing of the reply has been shown and Finish would answer
// ErrNotShown, leaving the reply to be posted. The gateway then reserves
// that post's pacing slot together with the turn's completion, a round
// trip it would otherwise make at the post.
type Unshown interface {
	ReplySink
	Unshown() bool
}

// ReplySink shows one reply while it is written. The gateway calls its
// methods one at a time, never concurrently: any number of Show, then
// exactly one of Finish or Discard.
type ReplySink interface {
	// Show shows one step of progress. Text may be coalesced: a sink that
	// is paced may keep it and show it with a later step, or with Finish.
	// visible reports that the user now sees something of this reply (the
	// gateway measures the time to the first visible progress). An error
	// means the sink cannot go on showing progress; the gateway stops
	// calling Show and still calls Finish or Discard.
	Show(ctx context.Context, p Progress) (visible bool, err error)
	// Finish leaves the user with r, exactly once, in place of whatever
	// was shown: the live message is completed or edited to r.Text, or,
	// when it cannot be, removed and r posted plainly. An error means r was
	// not delivered and nothing of this reply remains shown; the gateway
	// then sends r with Send. ErrNotShown says so when nothing was ever
	// shown.
	Finish(ctx context.Context, r Reply) error
	// Discard removes whatever was shown: the turn ends without an answer
	// to show here (a notice goes by Send, or the message is answered
	// again later).
	Discard(ctx context.Context) error
}
