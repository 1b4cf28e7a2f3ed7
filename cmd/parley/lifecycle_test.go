package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestLifecycleStopsInReverseOnce(t *testing.T) {
	var logs bytes.Buffer
	l := lifecycle{log: slog.New(slog.NewTextHandler(&logs, nil))}
	var order []string
	errBroken := errors.New("broken pipe")
	for _, name := range []string{"store", "gateway", "channels", "http"} {
		l.onStop(name, func(context.Context) error {
			order = append(order, name)
			if name == "gateway" {
				return errBroken
			}
			return nil
		})
	}
	err := l.stop(context.Background())
	if got := strings.Join(order, " "); got != "http channels gateway store" {
		t.Errorf("stopped %s; want the reverse of the setup", got)
	}
	if !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "gateway: broken pipe") {
		t.Errorf("stop = %v; want the failing step named, and the steps after it run", err)
	}
	if !strings.Contains(logs.String(), "step=gateway") {
		t.Errorf("the failed step was not logged: %s", logs.String())
	}
	if err := l.stop(context.Background()); err != nil || len(order) != 4 {
		t.Errorf("a second stop ran steps again (%v, %v)", order, err)
	}
}
