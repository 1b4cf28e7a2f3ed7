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

// liveSink prints one answer as it is written, rendered as plain text
// (see channels.PlainText). What is printed cannot be taken back, so a
// line is printed only as far as its rendering is settled (a "**" may
// yet close), a withdrawn text is left where it is, ended, and marked by
// restartNote; the answer then starts again on a line of its own.
type liveSink struct {
	w       *waiter
	status  io.Writer
	shown   strings.Builder // the text received since the last reset
	render  channels.PlainTextRenderer
	pending string // the received part of the line not yet ended
	printed string // what is printed of pending's rendering
	open    bool   // a line of the answer is not yet ended
}

// Show implements channels.ReplySink.
func (s *liveSink) Show(_ context.Context, p channels.Progress) (bool, error) {
	switch p.Kind {
	case channels.ProgressText:
		if err := s.print(p.Text); err != nil {
			return false, err
		}
		s.shown.WriteString(p.Text)
		return true, nil
	case channels.ProgressReset:
		s.endLine()
		s.note(restartNote)
		s.restart()
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
		s.restart()
		rest = r.Text
	}
	if err := s.print(rest + "\n"); err != nil {
		return err
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

// print renders text, the next piece of the answer: each line it ends,
// and the settled start of the line it leaves open.
func (s *liveSink) print(text string) error {
	var b strings.Builder
	s.pending += text
	for {
		line, after, ended := strings.Cut(s.pending, "\n")
		if !ended {
			break
		}
		out, ok := s.render.Line(line)
		switch rest, same := strings.CutPrefix(out, s.printed); {
		case ok && same:
			b.WriteString(rest + "\n")
		case ok: // not expected: what was printed is left, the line follows whole
			b.WriteString("\n" + out + "\n")
		case s.printed != "":
			b.WriteString("\n")
		}
		s.pending, s.printed, s.open = after, "", false
	}
	if settled := s.render.Settled(s.pending); len(settled) > len(s.printed) && strings.HasPrefix(settled, s.printed) {
		b.WriteString(settled[len(s.printed):])
		s.printed, s.open = settled, true
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := io.WriteString(s.w.live, b.String()); err != nil {
		return fmt.Errorf("console: print the answer: %w", err)
	}
	return nil
}

// restart forgets the text received: what follows is a new answer.
func (s *liveSink) restart() {
	s.shown.Reset()
	s.render = channels.PlainTextRenderer{}
	s.pending, s.printed = "", ""
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
