package files

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/sessions"
)

// Store is where a Keeper keeps files: sessions.RedisStore, read by every
// replica.
type Store interface {
	KeepAttachment(ctx context.Context, conv string, f *sessions.KeptFile) (string, error)
	AttachmentInfo(ctx context.Context, conv, id string) (sessions.KeptFile, error)
	Attachment(ctx context.Context, conv, id string) (sessions.KeptFile, error)
}

// Keeper checks and keeps the files of turns: agent.FileKeeper.
type Keeper struct {
	store Store
	cfg   Config
}

var _ agent.FileKeeper = (*Keeper)(nil)

// NewKeeper returns a Keeper keeping files in store within cfg's bounds
// (nil: the defaults).
func NewKeeper(store Store, cfg *Config) *Keeper {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	return &Keeper{store: store, cfg: *cfg}
}

// MaxBytes is the bound on one file (files.max_bytes).
func (k *Keeper) MaxBytes() int64 { return k.cfg.MaxBytes }

// Keep implements agent.FileKeeper: the size first (before anything
// reads the bytes), the count of the turn, then what the bytes are.
func (k *Keeper) Keep(ctx context.Context, conv, source string, f agent.File, n int) (agent.KeptFile, error) {
	size := max(int64(len(f.Data)), f.Size)
	switch {
	case size > k.cfg.MaxBytes:
		return agent.KeptFile{}, fmt.Errorf("%s is over the %s a file may be (files.max_bytes)", agent.ByteSize(size), agent.ByteSize(k.cfg.MaxBytes))
	case len(f.Data) == 0:
		return agent.KeptFile{}, errors.New("the file is empty")
	case n >= k.cfg.MaxPerTurn:
		return agent.KeptFile{}, fmt.Errorf("this turn has kept its %d files already (files.max_per_turn)", k.cfg.MaxPerTurn)
	}
	typ, err := Sniff(f.Data, f.Type)
	if err != nil {
		return agent.KeptFile{}, err
	}
	kept := sessions.KeptFile{Name: f.Name, Type: typ, Source: source, Data: f.Data}
	if _, err := k.store.KeepAttachment(ctx, conv, &kept); err != nil {
		return agent.KeptFile{}, errors.New("it could not be stored just now")
	}
	return agent.KeptFile{ID: kept.ID, Type: typ, Source: source, Size: kept.Size}, nil
}

// Info implements agent.FileKeeper.
func (k *Keeper) Info(ctx context.Context, conv, id string) (agent.KeptFile, error) {
	f, err := k.store.AttachmentInfo(ctx, conv, id)
	if err != nil {
		return agent.KeptFile{}, err
	}
	return agent.KeptFile{ID: f.ID, Type: f.Type, Source: f.Source, Size: f.Size}, nil
}

// Attachment reads file id of conv with its bytes, for its delivery.
func (k *Keeper) Attachment(ctx context.Context, conv, id string) (sessions.KeptFile, error) {
	return k.store.Attachment(ctx, conv, id)
}
