package config_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
)

// TestModelKeyAsItsExpression: a key of models: is checked byte by byte
// now, not with the expression compiled at start-up; it accepts exactly
// what the expression did, around every bound.
func TestModelKeyAsItsExpression(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	keys := []string{"a", "Z", "0", "9", "_a", "-a", ".a", "a_b", "a.b", "a-b", "a b", "a/b", "a:b", "a@b", "a[b",
		"a`b", "a{b", "é", "aé", "B" + strings.Repeat("x", 61), "B" + strings.Repeat("x", 62), "B" + strings.Repeat("x", 63),
		"7" + strings.Repeat("-", 62), "7" + strings.Repeat(".", 63)}
	for _, k := range keys {
		yaml := "models:\n  '" + strings.ReplaceAll(k, "'", "''") + "': {name: x}\n"
		_, err := config.Load(writeFile(t, yaml), env(nil))
		refused := err != nil && strings.Contains(err.Error(), "letters, digits")
		if want := !re.MatchString(k); refused != want {
			t.Errorf("models key %q: refused %v, the expression would refuse %v (err %v)", k, refused, want, err)
		}
	}
}
