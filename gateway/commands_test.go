package gateway_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/skills"
)

// TestCommandsThatAreNotForTheModel: an unknown /command, and /skill:
// without a name, are answered with what to write instead of going to the
// model; text that merely starts with a slash still goes to the model.
func TestCommandsThatAreNotForTheModel(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	tests := []struct{ text, want string }{
		{"/frobnicate", "Unknown command `/frobnicate`"},
		{"/Reset-All now please", "Unknown command `/reset-all`"},
		{"/skill:", "Which skill?"},
		{"/skill: deploy", "Which skill?"},
	}
	for _, tt := range tests {
		r := s.say(t, "console", "u", tt.text)
		if !r.Notice || !strings.Contains(r.Text, tt.want) {
			t.Errorf("%q answered %+v; want a notice with %q", tt.text, r, tt.want)
		}
		if strings.HasPrefix(tt.want, "Unknown") && !strings.Contains(r.Text, "/help") {
			t.Errorf("%q: the answer does not list the commands: %q", tt.text, r.Text)
		}
	}
	if n := s.model.RequestCount(); n != 0 {
		t.Fatalf("the model saw %d requests; want none", n)
	}
	for _, text := range []string{"/etc/hosts is missing a line", "/ what does a lone slash mean?", "/2 of the cake"} {
		if r := s.say(t, "console", "u", text); r.Text != "echo: "+text {
			t.Errorf("%q answered %q; want it sent to the model", text, r.Text)
		}
	}
}

// TestSkillListPages: a long skill library is listed a page at a time,
// each page saying how to get the next.
func TestSkillListPages(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{Default: config.Level{Admins: []string{"console:boss"}}}, gateway.Config{})
	for i := range 30 {
		name := fmt.Sprintf("extra-%02d", i)
		writeSkillFile(t, filepath.Join(skills.UserSkillsDir(s.home), name), "---\nname: "+name+"\ndescription: An extra skill.\n---\nBody.\n")
	}
	if r := s.say(t, "console", "boss", "/skill reload"); !strings.Contains(r.Text, "Reloaded: 34 skills") {
		t.Fatalf("reload = %q", r.Text)
	}
	first := s.say(t, "console", "boss", "/skill list")
	if !strings.HasPrefix(first.Text, "34 skills, 1–25 shown (page 1 of 2; `/skill list 2` for the next):\n") {
		t.Errorf("first page starts %q", strings.SplitN(first.Text, "\n", 2)[0])
	}
	if n := strings.Count(first.Text, "\n- "); n != 25 {
		t.Errorf("first page lists %d skills, want 25", n)
	}
	second := s.say(t, "console", "boss", "/skill list 2")
	if !strings.HasPrefix(second.Text, "34 skills, 26–34 shown (page 2 of 2):\n") || strings.Count(second.Text, "\n- ") != 9 {
		t.Errorf("second page:\n%s", second.Text)
	}
	if strings.Contains(second.Text, "extra-00") || !strings.Contains(second.Text, "repo-conventions") {
		t.Errorf("second page holds the wrong skills:\n%s", second.Text)
	}
	for _, bad := range []string{"3", "0", "two"} {
		if r := s.say(t, "console", "boss", "/skill list "+bad); !strings.Contains(r.Text, "no page") || !strings.Contains(r.Text, "2 pages") {
			t.Errorf("/skill list %s = %q", bad, r.Text)
		}
	}
}
