package feishu

import (
	"testing"

	"github.com/parleyhq/parley/internal/ident/identtest"
)

// TestIdentsAsTheirExpressions: the checks that replaced regular
// expressions (compiled at start-up) accept exactly what those did.
func TestIdentsAsTheirExpressions(t *testing.T) {
	t.Parallel()
	identtest.Same(t, `^[A-Za-z0-9]{1,64}$`, isApprovalID)
	identtest.Same(t, `^[A-Za-z0-9_-]{1,256}$`, isResourceKey)
	identtest.Same(t, `^ou_[A-Za-z0-9_-]{1,64}$`, isOpenID)
}
