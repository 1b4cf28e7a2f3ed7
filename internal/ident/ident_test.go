package ident_test

import (
	"testing"

	"github.com/parleyhq/parley/internal/ident"
	"github.com/parleyhq/parley/internal/ident/identtest"
)

func TestSameAsTheExpression(t *testing.T) {
	alnum := ident.Of("A-Za-z0-9")
	key := ident.Of("A-Za-z0-9_-")
	for _, c := range []struct {
		re    string
		check func(string) bool
	}{
		{`^[A-Za-z0-9]{1,64}$`, func(s string) bool { return alnum.Match(s, 1, 64) }},
		{`^[A-Za-z0-9_-]{1,256}$`, func(s string) bool { return key.Match(s, 1, 256) }},
		{`^[A-Za-z0-9]{0,3}$`, func(s string) bool { return alnum.Match(s, 0, 3) }},
		{`^[a-z][a-z0-9_]{0,47}$`, func(s string) bool { return ident.Led(s, ident.Of("a-z"), ident.Of("a-z0-9_"), 0, 47) }},
		{`^[-.]{2,5}$`, func(s string) bool { return ident.Of("-.").Match(s, 2, 5) }},
		{`^[.-]{2,5}$`, func(s string) bool { return ident.Of(".-").Match(s, 2, 5) }},
		{`^[a-z0-9][a-z0-9_-]{0,31}$`, func(s string) bool { return ident.Name(s, 32) }},
		{`^[a-z0-9][a-z0-9_-]{0,2}$`, func(s string) bool { return ident.Name(s, 3) }},
	} {
		identtest.Same(t, c.re, c.check)
	}
}

func TestOfPanicsOnNonASCII(t *testing.T) {
	for _, spec := range []string{"é", "z-a"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Of(%q) did not panic", spec)
				}
			}()
			ident.Of(spec)
		}()
	}
}

// TestNoAllocation: a set is a value, and checking a string allocates
// nothing (the expressions it replaces kept their compiled programs).
func TestNoAllocation(t *testing.T) {
	var ok bool
	if n := testing.AllocsPerRun(100, func() {
		ok = ident.Of("A-Za-z0-9_-").Match("ou_0123456789abcdef", 1, 64)
	}); n != 0 || !ok {
		t.Errorf("%v allocations a check (match %v)", n, ok)
	}
}
