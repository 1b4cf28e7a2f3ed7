// Package console is the terminal channel behind `parley chat`: it reads
// lines, submits them through the same gateway path as every other channel,
// and writes each reply when it arrives.
package console

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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

func init() {
	// The console has no section in the file; registering it makes
	// policies.platforms.console valid and its metrics primed.
	config.RegisterPlatform(config.Platform{Name: Name})
}

// Adapter is the console channel. Replies are matched to the message that
// asked by its id, so one process can wait for exactly its own answer.
type Adapter struct {
	conversation string
	user         string

	mu      sync.Mutex
	waiters map[string]chan channels.Reply
}

var _ channels.Channel = (*Adapter)(nil)

// New returns a console adapter for one conversation.
func New(conversation, user string) *Adapter {
	return &Adapter{conversation: conversation, user: user, waiters: map[string]chan channels.Reply{}}
}

// NewConversationID returns a fresh random conversation id.
func NewConversationID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Name implements channels.Channel.
func (c *Adapter) Name() string { return Name }

// Send implements channels.Channel.
func (c *Adapter) Send(_ context.Context, m channels.Message, r channels.Reply) error {
	c.mu.Lock()
	w, ok := c.waiters[m.Meta["console_id"]]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("console: no one is waiting for a reply to this message")
	}
	select {
	case w <- r:
	default: // a second reply (e.g. a refusal) to the same message is dropped
	}
	return nil
}

// Ask submits text and waits for its reply.
func (c *Adapter) Ask(ctx context.Context, h channels.Handler, text string) (channels.Reply, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w := make(chan channels.Reply, 1)
	c.mu.Lock()
	c.waiters[id] = w
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	m := channels.Message{
		Channel: Name, Chat: c.conversation, User: c.user, DM: true,
		Text: text, Received: time.Now(), Meta: map[string]string{"console_id": id},
	}
	if err := h.Submit(ctx, m); err != nil {
		return channels.Reply{}, err
	}
	select {
	case r := <-w:
		return r, nil
	case <-ctx.Done():
		return channels.Reply{}, ctx.Err()
	}
}

// REPL reads lines from in until EOF or ctx ends, printing each reply to
// out. Blank lines are skipped; "/exit" or "/quit" ends the session.
func (c *Adapter) REPL(ctx context.Context, h channels.Handler, in io.Reader, out io.Writer) error {
	fmt.Fprintf(out, "parley chat — conversation %s (continue it later with --conversation %s). /help for commands, /exit to leave.\n", c.conversation, c.conversation)
	lines := make(chan string)
	readErr := make(chan error, 1)
	// The reader goroutine ends when in does; a terminal's stdin outlives
	// ctx, so REPL returns without waiting for it.
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	for {
		fmt.Fprint(out, "> ")
		var line string
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				return <-readErr
			}
			line = strings.TrimSpace(l)
		}
		if line == "" {
			continue
		}
		if line == "/exit" || line == "/quit" {
			return nil
		}
		r, err := c.Ask(ctx, h, line)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		fmt.Fprintln(out, r.Text)
	}
}
