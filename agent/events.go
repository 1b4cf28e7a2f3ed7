package agent

import (
	"maps"
	"slices"

	"github.com/parleyhq/parley/sessions"
)

// A turn tells what it is doing while it runs, so that a channel can show
// the answer being written and the tools being called (TurnRequest.Events).
// The answer itself is the TurnResult; events are only what may be shown
// before it.

// EventKind says what an Event reports.
type EventKind int

const (
	// EventText: Text is the next piece of the answer being written,
	// following the pieces since the last EventReset.
	EventText EventKind = iota + 1
	// EventTool: the tool Name is about to be called.
	EventTool
	// EventSkill: the skill Name was loaded into the conversation.
	EventSkill
	// EventReset: the text since the last reset is not part of the answer
	// and must no longer be shown: the model's stream failed midway and
	// the request is sent again, or the text led to tool calls rather than
	// being the answer. The pieces that follow start the text anew.
	EventReset
)

func (k EventKind) String() string {
	switch k {
	case EventText:
		return "text"
	case EventTool:
		return "tool"
	case EventSkill:
		return "skill"
	case EventReset:
		return "reset"
	}
	return "unknown"
}

// Event is one thing a running turn reports.
type Event struct {
	Kind EventKind
	Text string // EventText
	Name string // EventTool, EventSkill
}

// emitter hands a turn's events to its listener and remembers whether
// text was shown since the last reset. Its methods do nothing on a nil
// emitter or one without a listener.
type emitter struct {
	fn    func(Event)
	shown bool
}

func (e *emitter) text(s string) {
	if e == nil || e.fn == nil || s == "" {
		return
	}
	e.shown = true
	e.fn(Event{Kind: EventText, Text: s})
}

// reset withdraws the text shown since the last reset, if there was any.
func (e *emitter) reset() {
	if e == nil || e.fn == nil || !e.shown {
		return
	}
	e.shown = false
	e.fn(Event{Kind: EventReset})
}

func (e *emitter) named(kind EventKind, name string) {
	if e == nil || e.fn == nil {
		return
	}
	e.fn(Event{Kind: kind, Name: name})
}

// announceCalls tells ev about the calls of a batch that will run. A name
// the registry does not know is the model's invention and is not shown.
func (a *Agent) announceCalls(ev *emitter, calls []sessions.ToolCall) {
	if ev == nil || ev.fn == nil {
		return
	}
	for _, c := range calls {
		if _, ok := a.tools.Get(c.Name); ok {
			ev.named(EventTool, c.Name)
		}
	}
}

// announceSkills tells ev about the skills a call injected.
func announceSkills(ev *emitter, inject []sessions.Message) {
	if ev == nil || ev.fn == nil || len(inject) == 0 {
		return
	}
	names, _ := InjectedSkills(inject)
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ev.named(EventSkill, n)
	}
}

// onText is the text callback for a stream: nil without a listener, so
// that the stream reader skips it.
func (e *emitter) onText() func(string) {
	if e == nil || e.fn == nil {
		return nil
	}
	return e.text
}
