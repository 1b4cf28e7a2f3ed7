package channeltest

import (
	"testing"

	"github.com/parleyhq/parley/channels"
)

// TestEveryCapabilityHasAContract: a capability added to channels'
// table without a contract check here fails, and so does a check of a
// capability the table no longer has.
func TestEveryCapabilityHasAContract(t *testing.T) {
	t.Parallel()
	table := map[Capability]bool{}
	for _, e := range channels.CapabilityTable() {
		table[Capability(e.Name)] = true
		if _, ok := contracts[Capability(e.Name)]; !ok {
			t.Errorf("channels.%s has no contract check in channeltest", e.Name)
		}
	}
	for c := range contracts {
		if !table[c] {
			t.Errorf("channeltest checks %s, which channels.CapabilityTable does not list", c)
		}
	}
}
