package sessions

import (
	"encoding/json"
	"errors"
	"fmt"
)

// History is a conversation's stored history, oldest first, kept the way
// Redis holds it: one encoded Message per entry. A turn sends the history
// to the model without decoding it (Peek reads the few fields that decide
// how an entry is sent), so that the cost of a turn does not grow with the
// number of messages; Messages decodes it for the rarer users that need
// the values (compaction, skill bookkeeping, tools).
//
// The entries share one buffer and must not be modified.
type History struct {
	entries []json.RawMessage
	size    int
}

// HistoryOf encodes msgs as a History, as Complete would store them.
func HistoryOf(msgs []Message) (History, error) {
	h := History{entries: make([]json.RawMessage, 0, len(msgs))}
	for i := range msgs {
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			return History{}, fmt.Errorf("sessions: encode message: %w", err)
		}
		h.entries = append(h.entries, b)
		h.size += len(b)
	}
	return h, nil
}

// Len is the number of messages.
func (h History) Len() int { return len(h.entries) }

// Entry is the i-th message, encoded.
func (h History) Entry(i int) json.RawMessage { return h.entries[i] }

// Bytes is the size of the encoded history.
func (h History) Bytes() int { return h.size }

// Messages decodes the whole history. An entry that is not a message is
// an error naming its position.
func (h History) Messages() ([]Message, error) {
	out := make([]Message, len(h.entries))
	for i, e := range h.entries {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			return nil, fmt.Errorf("sessions: history entry %d is not a message: %w", i, err)
		}
	}
	return out, nil
}

// errFraming is a history blob that is not a sequence of length-prefixed
// entries: a script and its reader disagree, never a user's doing.
var errFraming = errors.New("sessions: malformed history framing")

// parseFramed splits the claim script's history blob, "<len>:<entry>"
// repeated, into entries that share one buffer: one allocation for the
// bytes and one for the entry list, however long the history is.
func parseFramed(blob string) (History, error) {
	if blob == "" {
		return History{}, nil
	}
	buf := []byte(blob)
	n := 0
	for rest := buf; len(rest) > 0; n++ {
		head, l, ok := frame(rest)
		if !ok {
			return History{}, errFraming
		}
		rest = rest[head+l:]
	}
	h := History{entries: make([]json.RawMessage, 0, n)}
	for rest := buf; len(rest) > 0; {
		head, l, _ := frame(rest)
		h.entries = append(h.entries, json.RawMessage(rest[head:head+l:head+l]))
		h.size += l
		rest = rest[head+l:]
	}
	return h, nil
}

// frame reads the "<len>:" prefix of b: the prefix's length and the
// entry's, checked to fit in b.
func frame(b []byte) (head, length int, ok bool) {
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		length = length*10 + int(b[i]-'0')
		if length > len(b) {
			return 0, 0, false
		}
	}
	if i == 0 || i >= len(b) || b[i] != ':' || length > len(b)-i-1 {
		return 0, 0, false
	}
	return i + 1, length, true
}
