package agent

import (
	"testing"

	"github.com/parleyhq/parley/internal/ident/identtest"
)

// TestIdentsAsTheirExpressions: the checks that replaced regular
// expressions (compiled at start-up) accept exactly what those did.
func TestIdentsAsTheirExpressions(t *testing.T) {
	identtest.Same(t, toolNamePattern, func(s string) bool { return toolNameChars.Match(s, 1, 64) })
}
