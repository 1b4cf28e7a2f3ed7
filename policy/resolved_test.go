package policy

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestResolveKeepsEachScopesAnswer: a scope asked again is answered from
// memory without allocating, a copy made With… answers by its own
// settings however much its parent has kept, and past maxResolved scopes
// the memory is dropped rather than grown, every answer still the one a
// fresh resolution gives.
func TestResolveKeepsEachScopesAnswer(t *testing.T) {
	no := false
	r := New(tree(t, 3, func(l *config.Level, i int) {
		if i == 3 {
			l.Tools.Write = &no
		}
	}))
	first := r.Resolve(fullScope)
	if again := r.Resolve(fullScope); again != first {
		t.Fatal("the same scope was resolved twice")
	}
	if n := testing.AllocsPerRun(100, func() { r.Resolve(fullScope) }); n != 0 {
		t.Errorf("Resolve of a kept scope: %.0f allocations, want 0", n)
	}
	if d := first.Tool("save", true); d.Allowed {
		t.Errorf("kept answer lost the chat's tools.write: false: %+v", d)
	}

	op := r.WithOperator("slack", "alice")
	if !op.Resolve(fullScope).IsOperator("alice") || r.Resolve(fullScope).IsOperator("alice") {
		t.Error("the operator's copy shares its parent's answers")
	}

	for i := range maxResolved + 100 {
		s := Scope{Channel: "slack", Workspace: "T1", Chat: fmt.Sprintf("C%d", i)}
		if got, want := r.Resolve(s), r.resolve(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("scope %+v: kept %+v, resolved %+v", s, got, want)
		}
	}
	if n := r.resolved.n.Load(); n > maxResolved {
		t.Errorf("%d scopes kept, at most %d wanted", n, maxResolved)
	}
	if got, want := r.Resolve(fullScope), r.resolve(fullScope); !reflect.DeepEqual(got, want) {
		t.Errorf("after the memory was dropped: %+v, want %+v", got, want)
	}
}

// BenchmarkResolve: a scope resolved afresh (what every message did
// before the answers were kept) and a kept one.
func BenchmarkResolve(b *testing.B) {
	no := false
	r := New(tree(b, 3, func(l *config.Level, i int) {
		if i == 3 {
			l.Tools.Write = &no
		}
	})).WithProfiles(&Profiles{})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.resolve(fullScope)
		}
	})
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Resolve(fullScope)
		}
	})
}
