package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// lifecycle is the teardown of what a command set up. Each step of the
// setup registers how to undo itself with onStop, right after it
// succeeded; stop runs the steps in reverse, once, whatever path got there
// — a failure halfway through setup undoes exactly what was done.
type lifecycle struct {
	log *slog.Logger

	mu      sync.Mutex
	steps   []stopStep
	stopped bool
}

type stopStep struct {
	name string
	fn   func(ctx context.Context) error
}

// onStop registers the teardown of a step that has just been set up.
func (l *lifecycle) onStop(name string, fn func(ctx context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, stopStep{name: name, fn: fn})
}

// stop runs every registered step in reverse order of registration, each
// with ctx, and returns their errors joined, each named by its step. A
// failing step is logged and does not keep the next ones from running.
// Later calls return nil.
func (l *lifecycle) stop(ctx context.Context) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	l.stopped = true
	steps := l.steps
	l.mu.Unlock()
	var errs []error
	for _, s := range slices.Backward(steps) {
		if err := s.fn(ctx); err != nil {
			l.log.Warn("teardown step failed", "step", s.name, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}
