// Package console is the terminal channel behind `parley chat`: it reads
// lines, submits them through the same gateway path as every other channel,
// and writes each reply when it arrives.
//
// Every message submitted here is answered in this process, whichever
// process served it: with a shared Redis, another `parley chat` on the same
// conversation may hold the conversation and answer this process's message,
// and it leaves the reply in a per-message mailbox that the waiting process
// reads (see Mailbox).
package console

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
)

// Name is the platform name of the console.
const Name = "console"

// MaxLineBytes is the longest line the console reads; a longer one is
// refused without being sent.
const MaxLineBytes = 1 << 20

func init() {
	// The console has no section in the file; registering it makes
	// policies.platforms.console valid and its metrics primed.
	config.RegisterPlatform(config.Platform{Name: Name})
}

// Mailbox carries replies between processes that share a store: the
// process that answered a message posts the reply under the message's id,
// and the process that waits for it takes it.
type Mailbox interface {
	PostReply(ctx context.Context, id string, body []byte) error
	// TakeReply returns the oldest reply posted for id, if any, without
	// blocking.
	TakeReply(ctx context.Context, id string) (body []byte, ok bool, err error)
}

// Options are the console's optional parts.
type Options struct {
	// Mailbox, when set, carries replies to and from other processes on
	// the same conversation. Nil: replies are delivered in this process
	// only (the in-memory store, where no other process can answer).
	Mailbox Mailbox
	// Durable says that the conversation outlives the process (it is
	// kept in a shared Redis), so the banner may offer --conversation.
	Durable bool
	// Live makes REPL print each answer as it is written (see AskLive).
	Live bool
	// Status, when set, is told what a live answer is doing (a tool
	// running, a skill loaded), one line each; the answer's own output
	// stays free of it.
	Status io.Writer
	// FilesDir is where the files a turn sends are written
	// ($PARLEY_HOME/files); empty: the console takes no files, and their
	// captions come as text.
	FilesDir string
	// FileOut is where the path of each file written is printed (nil:
	// Status).
	FileOut io.Writer
}

// Adapter is the console channel. Replies are matched to the message that
// asked by its id, so one process waits for exactly its own answer.
type Adapter struct {
	conversation string
	user         string
	opts         Options

	mu      sync.Mutex
	waiters map[string]*waiter
	// allowed are the files FetchAttachment opens; pending go with the
	// next message.
	allowed map[string]bool
	pending []channels.Attachment
}

// waiter is a message of this process waiting for its answer.
type waiter struct {
	answers chan answer
	live    io.Writer // where the answer is printed as it is written; nil: not live
}

// answer is a reply, and whether it is already printed (live).
type answer struct {
	reply channels.Reply
	shown bool
}

var (
	_ channels.Channel  = (*Adapter)(nil)
	_ channels.Awaited  = (*Adapter)(nil)
	_ channels.Streamer = (*Adapter)(nil)
)

// New returns a console adapter for one conversation.
func New(conversation, user string, opts Options) *Adapter {
	return &Adapter{conversation: conversation, user: user, opts: opts, waiters: map[string]*waiter{}}
}

// NewConversationID returns a fresh random conversation id.
func NewConversationID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Name implements channels.Channel.
func (c *Adapter) Name() string { return Name }

// AwaitsEveryReply implements channels.Awaited: the console waits for an
// answer to each line before reading the next.
func (c *Adapter) AwaitsEveryReply() {}

// Send implements channels.Channel. A reply to a message this process
// waits for is handed over directly; any other goes to the mailbox, for
// the process that submitted it.
func (c *Adapter) Send(ctx context.Context, m channels.Message, r channels.Reply) error {
	id := m.Meta["console_id"]
	c.mu.Lock()
	w, ok := c.waiters[id]
	c.mu.Unlock()
	if ok {
		select {
		case w.answers <- answer{reply: r}:
			return nil
		default: // a second reply to the same message: to the mailbox below
		}
	}
	if c.opts.Mailbox == nil {
		if ok {
			return nil // nobody else could be waiting for it
		}
		return fmt.Errorf("console: no one is waiting for a reply to this message")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("console: encode reply: %w", err)
	}
	return c.opts.Mailbox.PostReply(ctx, id, body)
}

// mailboxPoll is how often a waiting console looks into its mailbox for an
// answer another process gave. Replies this process gives itself arrive
// at once.
const mailboxPoll = 100 * time.Millisecond

// Ask submits text and waits for its reply, until ctx ends.
func (c *Adapter) Ask(ctx context.Context, h channels.Handler, text string) (channels.Reply, error) {
	a, err := c.ask(ctx, h, text, nil)
	return a.reply, err
}

// AskLive submits text and prints its answer to out as it is written,
// ending with a newline once the answer is complete. shown reports that r
// is printed so; a reply that was not (a notice, an apology, an answer
// another process gave) is the caller's to print.
func (c *Adapter) AskLive(ctx context.Context, h channels.Handler, text string, out io.Writer) (r channels.Reply, shown bool, err error) {
	a, err := c.ask(ctx, h, text, out)
	return a.reply, a.shown, err
}

func (c *Adapter) ask(ctx context.Context, h channels.Handler, text string, live io.Writer) (answer, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w := &waiter{answers: make(chan answer, 1), live: live}
	c.mu.Lock()
	c.waiters[id] = w
	atts := c.pending
	c.pending = nil
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	m := channels.Message{
		Channel: Name, Chat: c.conversation, User: c.user, DM: true,
		Text: text, Received: time.Now(), Meta: map[string]string{"console_id": id},
		Attachments: atts,
	}
	if err := h.Submit(ctx, m); err != nil {
		return answer{}, err
	}
	var poll <-chan time.Time
	if c.opts.Mailbox != nil {
		t := time.NewTicker(mailboxPoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case a := <-w.answers:
			return a, nil
		case <-ctx.Done():
			return answer{}, ctx.Err()
		case <-poll:
			body, ok, err := c.opts.Mailbox.TakeReply(ctx, id)
			if err != nil || !ok {
				// Redis failing is the gateway's to report; keep waiting.
				continue
			}
			var r channels.Reply
			if err := json.Unmarshal(body, &r); err != nil {
				return answer{}, fmt.Errorf("console: a reply in the mailbox does not decode: %w", err)
			}
			return answer{reply: r}, nil
		}
	}
}

// Banner is the line the interactive console starts with.
func (c *Adapter) Banner() string {
	if c.opts.Durable {
		return fmt.Sprintf("parley chat — conversation %s (continue it later with --conversation %s). /help for commands, /exit to leave.", c.conversation, c.conversation)
	}
	return fmt.Sprintf("parley chat — conversation %s, kept in this process only (set REDIS_URL to keep conversations and continue them later). /help for commands, /exit to leave.", c.conversation)
}

// tooLongLine answers a line longer than MaxLineBytes.
var tooLongLine = fmt.Sprintf("That line is longer than %d MiB, so it was not sent. Please shorten it or split it up.", MaxLineBytes>>20)

// line is one line read from the console; tooLong when it exceeded
// MaxLineBytes (its text is then dropped).
type line struct {
	text    string
	tooLong bool
}

// readLines sends the lines of in to out until in ends or ctx does; the
// error of in, if any, goes to errc. A line longer than MaxLineBytes is
// skipped to its end and reported as tooLong, so that one oversized paste
// does not end the session.
func readLines(ctx context.Context, in io.Reader, out chan<- line, errc chan<- error) {
	defer close(out)
	r := bufio.NewReaderSize(in, 64*1024)
	for {
		var (
			buf     []byte
			tooLong bool
			err     error
		)
		for {
			var chunk []byte
			var more bool
			chunk, more, err = r.ReadLine()
			if !tooLong {
				buf = append(buf, chunk...)
				if len(buf) > MaxLineBytes {
					tooLong, buf = true, nil
				}
			}
			if err != nil || !more {
				break
			}
		}
		if err != nil && len(buf) == 0 && !tooLong {
			if !errors.Is(err, io.EOF) {
				errc <- err
			}
			return
		}
		select {
		case out <- line{text: string(buf), tooLong: tooLong}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// REPL reads lines from in until EOF or ctx ends, printing each reply to
// out. Blank lines are skipped; "/exit" or "/quit" ends the session. It
// returns ctx's error when ctx ended while a message waited for its
// answer, nil when it ended at the prompt.
func (c *Adapter) REPL(ctx context.Context, h channels.Handler, in io.Reader, out io.Writer) error {
	fmt.Fprintln(out, c.Banner())
	lines := make(chan line)
	readErr := make(chan error, 1)
	// The reader goroutine ends when in does; a terminal's stdin outlives
	// ctx, so REPL returns without waiting for it.
	go readLines(ctx, in, lines, readErr)
	for {
		fmt.Fprint(out, "> ")
		var l line
		select {
		case <-ctx.Done():
			return nil
		case got, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				select {
				case err := <-readErr:
					return err
				default:
					return nil
				}
			}
			l = got
		}
		if l.tooLong {
			fmt.Fprintln(out, tooLongLine)
			continue
		}
		text := strings.TrimSpace(l.text)
		if text == "" {
			continue
		}
		if text == "/exit" || text == "/quit" {
			return nil
		}
		// A cancelled turn is the caller's to report (ctx's error).
		var live io.Writer
		if c.opts.Live {
			live = out
		}
		a, err := c.ask(ctx, h, text, live)
		if err != nil {
			return err
		}
		if !a.shown {
			fmt.Fprintln(out, channels.PlainText(a.reply.Text))
		}
	}
}
