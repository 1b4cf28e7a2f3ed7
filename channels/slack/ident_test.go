package slack

import (
	"testing"

	"github.com/parleyhq/parley/internal/ident/identtest"
)

// TestIdentsAsTheirExpressions: the checks that replaced regular
// expressions (compiled at start-up) accept exactly what those did.
func TestIdentsAsTheirExpressions(t *testing.T) {
	t.Parallel()
	identtest.Same(t, `^[UW][A-Z0-9]{1,20}$`, isUserID)
	identtest.Same(t, `^[a-z][a-z0-9_]{0,47}$`, isCode)
	identtest.Same(t, `^[A-Za-z0-9]{1,64}$`, isApprovalValue)
}
