package console

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/parleyhq/parley/channels"
)

// StartReply implements channels.Streamer: an answer this process waits
// for with AskLive is printed as it is written. Any other (a message of
// another process, or one asked with Ask) is not streamed.
func (c *Adapter) StartReply(_ context.Context, m channels.Message) (channels.ReplySink, error) {
	c.mu.Lock()
	w, ok := c.waiters[m.Meta["console_id"]]
	c.mu.Unlock()
	if !ok || w.live == nil {
		return nil, nil
	}
	return &liveSink{w: w, status: c.opts.Status}, nil
}

// restartNote tells the reader that the text above it was withdrawn: a
// terminal cannot take printed text back.
const restartNote = "[the answer was interrupted and starts again]"

// liveSink prints one answer as it is written. What is printed cannot be
// taken back, so a withdrawn text is left where it is, ended, and marked
// by restartNote; the answer then starts again on a line of its own.
type liveSink struct {
	w      *waiter
	status io.Writer
	shown  strings.Builder // the text printed since the last reset
	open   bool            // a line of the answer is not yet ended
}

// Show implements channels.ReplySink.
func (s *liveSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	switch p.Kind {
	case channels.ProgressText:
		if _, err := io.WriteString(s.w.live, p.Text); err != nil {
			return false, fmt.Errorf("console: print the answer: %w", err)
		}
		s.shown.WriteString(p.Text)
		s.open = !strings.HasSuffix(p.Text, "\n")
		return true, nil
	case channels.ProgressReset:
		s.endLine()
		s.note(restartNote)
		s.shown.Reset()
	case channels.ProgressTool:
		s.note("[running " + p.Name + "]")
	case channels.ProgressSkill:
		s.note("[loaded skill " + p.Name + "]")
	}
	return false, nil
}

// Finish implements channels.ReplySink: it prints what the printed text
// lacks of r.Text, or r.Text whole on a line of its own when the printed
// text is not its beginning, and hands r to the waiting AskLive.
func (s *liveSink) Finish(_ context.Context, r channels.Reply) error {
	rest, ok := strings.CutPrefix(r.Text, s.shown.String())
	if !ok {
		s.endLine()
		rest = r.Text
	}
	if _, err := fmt.Fprintln(s.w.live, rest); err != nil {
		return fmt.Errorf("console: print the answer: %w", err)
	}
	select {
	case s.w.answers <- answer{reply: r, shown: true}:
	default: // the waiter has its answer already: a second is not given
	}
	return nil
}

// Discard implements channels.ReplySink: the line is ended, and the
// notice that follows is printed by the waiting AskLive.
func (s *liveSink) Discard(context.Context) error {
	s.endLine()
	return nil
}

func (s *liveSink) endLine() {
	if s.open {
		_, _ = io.WriteString(s.w.live, "\n")
		s.open = false
	}
}

// note prints a status line where the status goes; a reset's note goes
// with the answer when there is nowhere else.
func (s *liveSink) note(text string) {
	if s.status != nil {
		_, _ = fmt.Fprintln(s.status, text)
	} else if text == restartNote {
		_, _ = fmt.Fprintln(s.w.live, text)
	}
}
