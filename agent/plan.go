package agent

import (
	"bytes"
	"encoding/json"

	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
)

// How a stored entry goes into a request.
const (
	sendAsIs       = iota // role and content (user, system, assistant without calls)
	sendAsUser            // content as a user message (injections, summaries)
	sendCalls             // an assistant message with the calls the plan keeps
	sendToolResult        // a tool result, with its call id
)

// planStep is one entry of the stored history as it is sent.
type planStep struct {
	i  int // the entry
	as int // sendAsIs, sendAsUser, sendCalls or sendToolResult
	// calls, for sendCalls, is the range of plan.calls listing the
	// positions of the calls kept, in order.
	callsFrom, callsTo int
}

// plan is the sanitised stored history of one turn: which entries are
// sent and how, read from the entries without decoding them. See Sanitize
// for the rules.
type plan struct {
	history sessions.History
	peeked  []sessions.Peeked
	steps   []planStep
	calls   []int
}

// newPlan peeks at every entry of h and applies the rules of Sanitize. It
// allocates the same few slices at any history length; entries that are
// not messages are left out.
func newPlan(h sessions.History) *plan {
	p := &plan{history: h, peeked: make([]sessions.Peeked, h.Len()), steps: make([]planStep, 0, h.Len())}
	for i := range p.peeked {
		pk, err := sessions.Peek(h.Entry(i))
		if err != nil {
			continue // Role "": dropped below like an unknown role
		}
		p.peeked[i] = pk
	}
	start := len(p.peeked)
	for i, m := range p.peeked {
		if m.Role == "user" || m.Kind == sessions.KindSummary {
			start = i
			break
		}
	}
	var ids [][]byte // call ids of one batch: kept ones, then results already sent
	for i := start; i < len(p.peeked); i++ {
		m := p.peeked[i]
		if m.Kind == sessions.KindInjection || m.Kind == sessions.KindSummary {
			if m.HasContent() {
				p.steps = append(p.steps, planStep{i: i, as: sendAsUser})
			}
			continue
		}
		switch m.Role {
		case "user", "system":
			if m.HasContent() {
				p.steps = append(p.steps, planStep{i: i, as: sendAsIs})
			}
		case "assistant":
			if !hasCalls(m) {
				if m.HasContent() {
					p.steps = append(p.steps, planStep{i: i, as: sendAsIs})
				}
				continue
			}
			j := i + 1
			for j < len(p.peeked) && p.peeked[j].Role == "tool" {
				j++
			}
			results := p.peeked[i+1 : j]
			first := i + 1
			i = j - 1
			// Keep each call (the first of an id) whose result is there.
			ids = ids[:0]
			from := len(p.calls)
			n := 0
			for c, rest, ok := sessions.NextCall(m.ToolCalls); ok; c, rest, ok = sessions.NextCall(rest) {
				if answered(results, c.ID) && !containsToken(ids, c.ID) {
					ids = append(ids, c.ID)
					p.calls = append(p.calls, n)
				}
				n++
			}
			if len(ids) == 0 {
				if m.HasContent() {
					p.steps = append(p.steps, planStep{i: first - 1, as: sendAsIs})
				}
				continue
			}
			p.steps = append(p.steps, planStep{i: first - 1, as: sendCalls, callsFrom: from, callsTo: len(p.calls)})
			for k, r := range results {
				if r.HasContent() && removeToken(&ids, r.ToolCallID) { // one result per call
					p.steps = append(p.steps, planStep{i: first + k, as: sendToolResult})
				}
			}
		}
		// Orphan tool messages (not directly after their call) and
		// unknown roles are dropped.
	}
	return p
}

// write writes the planned history into w.
func (p *plan) write(w *requestWriter) {
	for _, s := range p.steps {
		w.stored(p.peeked[s.i], s, p.calls[s.callsFrom:s.callsTo])
	}
}

// messages decodes the planned history: what the tools of the turn see.
// It is only called on turns that run tools.
func (p *plan) messages() []sessions.Message {
	all, err := p.history.Messages()
	if err != nil {
		// An entry that is not a message was dropped by the plan; decode
		// the planned ones only.
		all = make([]sessions.Message, p.history.Len())
		for _, s := range p.steps {
			_ = json.Unmarshal(p.history.Entry(s.i), &all[s.i])
		}
	}
	out := make([]sessions.Message, 0, len(p.steps))
	for _, s := range p.steps {
		m := all[s.i]
		switch s.as {
		case sendAsUser, sendAsIs:
			m.ToolCalls, m.ToolCallID = nil, ""
		case sendCalls:
			kept := make([]sessions.ToolCall, 0, s.callsTo-s.callsFrom)
			for _, n := range p.calls[s.callsFrom:s.callsTo] {
				kept = append(kept, m.ToolCalls[n])
			}
			m.ToolCalls = kept
		}
		out = append(out, m)
	}
	return out
}

// injectedSkills lists the skills whose injections are in the planned
// history, decoding only the injections.
func (p *plan) injectedSkills() map[string]bool {
	var names map[string]bool
	for _, s := range p.steps {
		pk := p.peeked[s.i]
		if pk.Kind != sessions.KindInjection {
			continue
		}
		var text string
		if json.Unmarshal(pk.Content, &text) != nil {
			continue
		}
		if name, ok := skills.ParseInjection(text); ok {
			if names == nil {
				names = map[string]bool{}
			}
			names[name] = true
		}
	}
	return names
}

func hasCalls(m sessions.Peeked) bool {
	_, _, ok := sessions.NextCall(m.ToolCalls)
	return ok
}

// answered reports whether results hold a non-empty result for call id.
func answered(results []sessions.Peeked, id []byte) bool {
	if len(id) <= 2 {
		return false
	}
	for _, r := range results {
		if r.HasCallID() && r.HasContent() && bytes.Equal(r.ToolCallID, id) {
			return true
		}
	}
	return false
}

func containsToken(ids [][]byte, id []byte) bool {
	for _, x := range ids {
		if bytes.Equal(x, id) {
			return true
		}
	}
	return false
}

// removeToken removes id from ids and reports whether it was there.
func removeToken(ids *[][]byte, id []byte) bool {
	for i, x := range *ids {
		if bytes.Equal(x, id) {
			*ids = append((*ids)[:i], (*ids)[i+1:]...)
			return true
		}
	}
	return false
}
