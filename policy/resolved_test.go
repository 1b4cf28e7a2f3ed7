package policy

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestResolveKeepsEachScopesAnswer: a scope asked again is answered from
// memory without allocating; every scope gets what a fresh resolution
// gives it, whichever scope's answer it shares; chats and workspaces the
// tree does not name share one answer, so the memory does not grow with
// them; a copy made With… answers by its own settings; and past
// maxResolved answers the memory is dropped rather than grown.
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

	// Every scope, asked in every order, gets what a fresh resolution
	// gives it, however many others share its kept answer.
	var scopes []Scope
	for _, ch := range []string{"slack", "feishu", "nowhere"} {
		for _, acc := range []string{"", "default", "hr"} {
			for _, ws := range []string{"", "T1", "T2"} {
				for _, chat := range []string{"", "C1", "C2", "C3"} {
					scopes = append(scopes, Scope{Channel: ch, Account: acc, Workspace: ws, Chat: chat})
				}
			}
		}
	}
	for round := range 2 {
		for i := range scopes {
			s := scopes[(i*7+round)%len(scopes)]
			if got, want := r.Resolve(s), r.resolve(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("scope %+v: kept %+v, resolved %+v", s, got, want)
			}
		}
	}
	if r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: "C2"}).Tool("save", true).Allowed == first.Tool("save", true).Allowed {
		t.Error("a chat the tree does not name got the answer of one it does")
	}

	// Chats the tree does not name share one answer: what is kept does
	// not grow with them.
	before := r.resolved.n.Load()
	for i := range 3 * maxResolved {
		r.Resolve(Scope{Channel: "slack", Workspace: "T1", Chat: fmt.Sprintf("D%d", i)})
		r.Resolve(Scope{Channel: "slack", Workspace: fmt.Sprintf("W%d", i), Chat: "C1"})
	}
	if n := r.resolved.n.Load(); n > before+2 {
		t.Errorf("%d answers kept after %d more for chats the tree does not name", n, n-before)
	}

	// Past maxResolved answers (accounts, here) what is kept is dropped,
	// not grown, and answers stay right.
	for i := range maxResolved + 100 {
		s := Scope{Channel: "slack", Account: fmt.Sprintf("a%d", i), Workspace: "T1", Chat: "C1"}
		if got, want := r.Resolve(s), r.resolve(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("scope %+v: kept %+v, resolved %+v", s, got, want)
		}
	}
	if n := r.resolved.n.Load(); n > maxResolved {
		t.Errorf("%d answers kept, at most %d wanted", n, maxResolved)
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
