package channels

import "context"

// A live reply whose process dies mid-answer would leave its half answer
// standing beside the answer the next process gives. So a sink names what
// it has shown (Referenced), the gateway records that reference with the
// turn, and the process that takes the conversation over adopts the reply
// (LiveAdopter) and finishes it with the whole answer, or removes it and
// posts the answer once.

// Referenced is a ReplySink that can name the messages it shows.
type Referenced interface {
	ReplySink
	// Reference names what the reply shows now, in a form only its own
	// adapter reads (LiveAdopter.AdoptReply), or "" while nothing is
	// shown. It changes only when the reply's messages do (a new message,
	// one removed), not with every piece of text, so that recording it
	// costs a write per message, not per edit.
	Reference() string
}

// LiveAdopter is implemented by adapters whose live replies another
// process can finish.
type LiveAdopter interface {
	// AdoptReply returns a sink for the live reply ref names, which
	// another process showed in answer to m and did not finish: the
	// caller calls Finish (the reply is left with the whole answer, or
	// removed and the answer left to be posted, as ReplySink's Finish
	// says) or Discard, never Show. An error means ref is not a reply of
	// this adapter to m's chat (malformed, too large, another chat's), and
	// nothing is touched.
	AdoptReply(ctx context.Context, m Message, ref string) (ReplySink, error)
}
