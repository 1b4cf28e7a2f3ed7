package wecomapp

import (
	"testing"

	"github.com/parleyhq/parley/internal/ident/identtest"
)

// TestIdentsAsTheirExpressions: the checks that replaced regular
// expressions (compiled at start-up) accept exactly what those did.
func TestIdentsAsTheirExpressions(t *testing.T) {
	identtest.Same(t, `^[a-z0-9][a-z0-9_-]{0,63}$`, validName)
}
