package approval

import (
	"strings"
	"testing"
	"time"
)

// TestArgsAreEscapedAndCut: arguments cannot close the prompt's code
// block, mention anyone or inject markup, and long ones are cut.
func TestArgsAreEscapedAndCut(t *testing.T) {
	hostile := `{"text":"` + "```" + `\n<!channel> <@U123> @all <at user_id=\"all\"></at> &lt;b&gt;"}`
	got := Args(hostile)
	for _, bad := range []string{"`", "<", ">", "@", "&"} {
		if strings.Contains(got, bad) {
			t.Errorf("Args left %q in %q", bad, got)
		}
	}
	if !strings.Contains(got, `"text": `) {
		t.Errorf("Args did not indent the JSON: %q", got)
	}
	long := `{"content":"` + strings.Repeat("x", 5000) + `"}`
	got = Args(long)
	if n := len([]rune(got)); n > MaxArgsShown+60 || !strings.Contains(got, "more characters not shown") {
		t.Errorf("long arguments shown as %d characters: %q…", n, got[:80])
	}

	r := NewRequest(time.Now(), 10*time.Minute)
	r.Tool, r.Args = "save_skill_reference", `{"name":"deploy"}`
	p := Prompt(r)
	if strings.Count(p, "```") != 2 || !strings.Contains(p, "/approve "+r.Code) || !strings.Contains(p, "expires in 10 minutes") {
		t.Errorf("prompt %q", p)
	}
	if len(r.Code) != 6 || strings.ContainsAny(r.Code, "01ILO") {
		t.Errorf("code %q", r.Code)
	}
}
