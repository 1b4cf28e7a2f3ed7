package config_test

import (
	"slices"
	"testing"

	"github.com/parleyhq/parley/config"
)

func TestInLineOrder(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in, want []string
	}{
		{"by line", []string{"line 10: b", "line 2: a"}, []string{"line 2: a", "line 10: b"}},
		{"warnings among problems", []string{"line 4: p", "warning: line 2: w"}, []string{"warning: line 2: w", "line 4: p"}},
		{"one line keeps its order", []string{"line 3: y", "line 3: x"}, []string{"line 3: y", "line 3: x"}},
		{"no line last, in order", []string{"k: from SLACK_BOT_TOKEN", "line 9: a", "warning: no line"}, []string{"line 9: a", "k: from SLACK_BOT_TOKEN", "warning: no line"}},
		{"not a number", []string{"line x: a", "line 1: b"}, []string{"line 1: b", "line x: a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := config.InLineOrder(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("InLineOrder(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
