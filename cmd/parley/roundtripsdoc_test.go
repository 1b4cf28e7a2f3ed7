package main

import (
	"os"
	"regexp"
	"testing"
)

// TestDocsAgreeOnRoundTrips: the README and the operations guide give one
// figure for the Redis round trips of a message, the one the gateway's
// tests count (TestAPlainTurnIsTwoRoundTrips: 1 for the webhook, 2 for the
// turn), where they once said 1 + 3 and 1 + 2.
func TestDocsAgreeOnRoundTrips(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\| Redis round trips per message \| (\d+): (\d+) for the webhook, (\d+) for the turn`)
	for _, f := range []string{"../../README.md", "../../docs/operations.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := row.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s has no row \"Redis round trips per message | N: W for the webhook, T for the turn\"", f)
		}
		if m[1] != "3" || m[2] != "1" || m[3] != "2" {
			t.Errorf("%s says %s: %s for the webhook, %s for the turn; the gateway's tests count 3: 1 and 2", f, m[1], m[2], m[3])
		}
	}
}
