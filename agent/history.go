package agent

import "github.com/parleyhq/parley/sessions"

// Sanitize returns the part of a stored history that can be sent to the
// model without the API rejecting it:
//
//   - leading messages before the first user message (or compaction
//     summary) are dropped, because a history trimmed to its length cap may
//     start in the middle of a turn;
//   - a tool message is kept only directly after the assistant message that
//     called it (possibly after sibling results), and an assistant's tool
//     call is kept only when its result is there; an assistant message left
//     with neither calls nor text is dropped;
//   - messages with unknown roles, and messages without content that need
//     it, are dropped.
//
// h is not modified; the result is a new slice. A turn applies the same
// rules to the stored history without decoding it (see plan).
func Sanitize(h []sessions.Message) []sessions.Message {
	hist, err := sessions.HistoryOf(h)
	if err != nil {
		return nil // a Message always encodes
	}
	return newPlan(hist).messages()
}
