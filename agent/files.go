package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// The files a turn's tools make — an MCP server's screenshot, a database
// tool's CSV, a rendered chart — are kept for the conversation through the
// FileKeeper the turn is given (TurnRequest.Files), in a store every
// replica reads, and described to the model by an id it can hand to
// send_file. What send_file asks to send is collected with the turn, kept
// across an approval's pause, and returned with the answer
// (TurnResult.Files): it goes out after the answer, never before.

// File is one file as a tool made it. Type and Name are the tool's claim:
// the keeper sniffs the type from Data and makes the name safe before the
// file is sent.
type File struct {
	Name string
	Type string
	Data []byte
	// Size is what the tool says the file weighs, when it says: a claim
	// over files.max_bytes is refused even before the bytes are looked at.
	Size int64
}

// KeptFile describes a file the conversation keeps.
type KeptFile struct {
	ID     string // att_N
	Type   string // sniffed from the bytes
	Source string // the tool that made it
	Size   int64
}

// Outgoing is a kept file the answer sends, with its caption.
type Outgoing struct {
	ID      string `json:"id"`
	Caption string `json:"caption,omitempty"`
}

// FileKeeper keeps the files of a conversation's turns.
type FileKeeper interface {
	// Keep checks f (its real type, its size, an image's dimensions) and
	// keeps it for conv as the n-th file of its turn (from 0); the error
	// says, for the model, why it was refused (the limits, a forged type).
	Keep(ctx context.Context, conv, source string, f File, n int) (KeptFile, error)
	// Info describes file id of conv; an error when conv keeps none.
	Info(ctx context.Context, conv, id string) (KeptFile, error)
}

// turnFiles is what a turn keeps of its files: shared by the turn's
// concurrent calls, so counted under a lock.
type turnFiles struct {
	keeper FileKeeper
	mu     sync.Mutex
	kept   int
}

// count is how many files the turn kept so far.
func (f *turnFiles) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kept
}

// Files is the turn's file keeper, for the tools that keep or send files
// (nil: this conversation keeps none).
func (tc *TurnContext) Files() FileKeeper {
	if tc.files == nil {
		return nil
	}
	return tc.files.keeper
}

// KeepFile keeps f, made by source, as a file of tc's turn, and returns
// the line that describes it (or its refusal) to the model.
func (tc *TurnContext) KeepFile(ctx context.Context, source string, f File) (KeptFile, string) {
	kind := fileKind(f.Type)
	if tc.files == nil || tc.files.keeper == nil {
		return KeptFile{}, fmt.Sprintf("[%s: %s, %s — not kept, this conversation sends no files]", kind, orUnknown(f.Type), ByteSize(int64(len(f.Data))))
	}
	tc.files.mu.Lock()
	n := tc.files.kept
	tc.files.kept++ // a refused file counts too: a tool cannot try forever
	tc.files.mu.Unlock()
	k, err := tc.files.keeper.Keep(ctx, tc.Conversation, source, f, n)
	if err != nil {
		return KeptFile{}, fmt.Sprintf("[%s refused: %s]", kind, err.Error())
	}
	return k, DescribeFile(k)
}

// DescribeFile is how the model sees a kept file:
// "[image att_1: image/png, 40.0 KiB, from grafana__render_panel]".
func DescribeFile(k KeptFile) string {
	return fmt.Sprintf("[%s %s: %s, %s, from %s]", fileKind(k.Type), k.ID, k.Type, ByteSize(k.Size), k.Source)
}

func fileKind(mime string) string {
	if strings.HasPrefix(mime, "image/") {
		return "image"
	}
	return "file"
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// ByteSize writes n bytes for a person: "312 bytes", "40.0 KiB", "2.5 MiB".
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// WithFiles returns a copy of tc keeping files through k as a turn's
// calls do, for a tool called outside a turn (a test, a command).
func (tc TurnContext) WithFiles(k FileKeeper) *TurnContext {
	tc.files = &turnFiles{keeper: k}
	return &tc
}
