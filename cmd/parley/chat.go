package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/console"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/sessions"
)

func (e *environment) chat(args []string) error {
	fs := newFlagSet("chat", e.stderr)
	path := configFlag(fs)
	var f chatFlags
	fs.StringVar(&f.message, "m", "", "send one message, print the reply and exit")
	fs.StringVar(&f.conversation, "conversation", "", "continue the conversation with this id (default: a new one)")
	fs.BoolVar(&e.verbose, "verbose", false, "log every skill warning instead of one line counting them")
	fs.BoolVar(&f.printConv, "print-conversation", false, "print the conversation id as the first line of output")
	fs.Var(&f.images, "image", "send the image FILE with the -m message (repeatable)")
	cfg, err := e.parseAndLoad(fs, path, args)
	if err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	// The console's stdout is the conversation; logs go to stderr, and only
	// warnings unless the operator asked for more.
	if e.getenv("PARLEY_LOG_LEVEL") == "" && cfg.Log.Level == "info" {
		cfg.Log.Level = "warn"
	}
	log := newLogger(e.stderr, cfg)
	e.oneShotChat = f.oneShot
	e.operator = e.consoleUser()
	a, err := e.newApp(cfg, log)
	if err != nil {
		return err
	}
	a.gateway.Start()
	defer func() {
		shutdown := context.WithoutCancel(e.ctx)
		if e.ctx.Err() != nil {
			// Ctrl-C: the running turn is cancelled now, not drained.
			if err := a.gateway.Shutdown(e.ctx); err != nil {
				log.Debug("turn cancelled", "err", err)
			}
		}
		ctx, cancel := context.WithTimeout(shutdown, gateway.SectionFrom(cfg).ShutdownTimeout)
		defer cancel()
		if err := a.close(ctx); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()

	ch, err := e.openConsole(a, f)
	if err != nil {
		return err
	}
	if f.oneShot {
		return e.askOnce(a, ch, f.message)
	}
	return e.cancelled(ch.REPL(e.ctx, a.gateway, e.stdin, e.stdout), a.shared)
}

// chatFlags are the flags of parley chat.
type chatFlags struct {
	message, conversation string
	printConv             bool
	images                imageFlags
	oneShot               bool // -m was given
}

// check refuses arguments and flags that do not go together.
func (f *chatFlags) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (quote the message: -m \"…\")", errUsage, strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(fl *flag.Flag) { f.oneShot = f.oneShot || fl.Name == "m" })
	if f.oneShot && strings.TrimSpace(f.message) == "" {
		// Not an interactive session: the caller meant to send something.
		return fmt.Errorf("%w: -m needs a message that is not blank", errUsage)
	}
	if len(f.images) > 0 && !f.oneShot {
		return fmt.Errorf("%w: --image goes with a message: -m \"…\" --image FILE", errUsage)
	}
	return nil
}

// openConsole registers the console channel for the conversation f names
// (or a new one) with a's gateway.
func (e *environment) openConsole(a *app, f chatFlags) (*console.Adapter, error) {
	conv, err := consoleChat(f.conversation)
	if err != nil {
		return nil, err
	}
	if conv == "" {
		conv = console.NewConversationID()
	}
	user := e.consoleUser()
	// On a terminal the answer is printed as it is written; into a file or
	// a pipe it is printed whole, so that the output is only the answer.
	live := isTerminal(e.stdout)
	// The files a turn sends are written under $PARLEY_HOME/files, their
	// paths printed with the answer.
	opts := console.Options{Durable: a.shared, Live: live, FilesDir: filepath.Join(a.cfg.Home, "files"), FileOut: e.stdout}
	if live {
		opts.Status = e.stderr
	}
	if a.shared {
		// Another chat process on the same conversation may answer this
		// one's messages, and this one theirs.
		opts.Mailbox = a.store
	}
	ch := console.New(conv, user, opts)
	if err := ch.AttachImages(f.images); err != nil {
		return nil, fmt.Errorf("%w: --image: %w", errUsage, err)
	}
	a.gateway.Register(ch)
	if f.printConv {
		fmt.Fprintln(e.stdout, conv)
	}
	return ch, nil
}

// consoleChat is the conversation id --conversation names: the id the
// banner shows, or the conversation as logs and the admin console show
// it (console::ID, with or without the key's trailing separator).
func consoleChat(named string) (string, error) {
	if !strings.Contains(named, ":") {
		return named, nil
	}
	parts := strings.SplitN(sessions.KeyOf(named), ":", 4)
	if len(parts) != 4 || parts[0] != console.Name || parts[1] != "" || parts[2] == "" || parts[3] != "" {
		return "", fmt.Errorf("%w: --conversation %q is no console conversation (want ID or console::ID)", errUsage, named)
	}
	return parts[2], nil
}

// consoleUser is the console's user id: the login name of the person at
// the terminal.
func (e *environment) consoleUser() string {
	if user := e.getenv("USER"); user != "" {
		return user
	}
	return "console"
}

// askOnce sends message, prints the answer (unless it was shown as it was
// written) and reports a turn that failed.
func (e *environment) askOnce(a *app, ch *console.Adapter, message string) error {
	var r channels.Reply
	var shown bool
	var err error
	if isTerminal(e.stdout) {
		r, shown, err = ch.AskLive(e.ctx, a.gateway, message, e.stdout)
	} else {
		r, err = ch.Ask(e.ctx, a.gateway, message)
	}
	if err != nil {
		return e.cancelled(err, a.shared)
	}
	if r.Failed {
		return fmt.Errorf("the message was not answered: %s", r.Text)
	}
	if !shown {
		// Plain text on a terminal and to a script alike: the model
		// writes Markdown, which neither renders.
		fmt.Fprintln(e.stdout, channels.PlainText(r.Text))
	}
	return nil
}

// imageFlags collects --image FILE, in order.
type imageFlags []string

func (f *imageFlags) String() string { return strings.Join(*f, ",") }

func (f *imageFlags) Set(v string) error {
	*f = append(*f, v)
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// cancelled words the error of a turn that Ctrl-C (or SIGTERM) stopped.
func (e *environment) cancelled(err error, shared bool) error {
	if err == nil || !errors.Is(err, context.Canceled) || e.ctx.Err() == nil {
		return err
	}
	if shared {
		return errors.New("cancelled: the running turn was stopped; the message stays queued and is answered when this conversation is next continued")
	}
	return errors.New("cancelled: the running turn was stopped and the message was not answered")
}
