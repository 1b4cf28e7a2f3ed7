package channels_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// TestOpenEachAccountOpensInNameOrder: every account is opened once, in
// the order of its name, the section's own as account ""; the first
// failure stops it and names its account.
func TestOpenEachAccountOpensInNameOrder(t *testing.T) {
	t.Parallel()
	accs := map[string]int{"ops": 2, channels.DefaultAccount: 1, "hr": 3}
	var got []string
	opened, err := channels.OpenEachAccount("slack", accs, func(n int, account string) (int, error) {
		got = append(got, account)
		return n * 10, nil
	})
	if err != nil || !slices.Equal(got, []string{"", "hr", "ops"}) || !slices.Equal(opened, []int{10, 30, 20}) {
		t.Fatalf("opened %v as %q, %v; want default, hr, ops in that order", opened, got, err)
	}
	refused := errors.New("token refused")
	_, err = channels.OpenEachAccount("slack", accs, func(n int, account string) (int, error) {
		if account == "hr" {
			return 0, refused
		}
		return n, nil
	})
	if !errors.Is(err, refused) || err.Error() != "slack account hr: token refused" {
		t.Errorf("a failing account = %v; want it named", err)
	}
}
