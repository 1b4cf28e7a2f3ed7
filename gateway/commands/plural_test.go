package commands

import "testing"

func TestCountSkills(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 skills", 1: "1 skill", 2: "2 skills", 131: "131 skills"} {
		if got := countSkills(n); got != want {
			t.Errorf("countSkills(%d) = %q, want %q", n, got, want)
		}
	}
}
