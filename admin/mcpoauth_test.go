package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/mcp"
)

// The authorization server's redirect lands on any replica's console,
// signed in or not, and reaches the `parley mcp login` waiting on the
// shared Redis; a forged or replayed state is refused, saying nothing of
// the request.
func TestMCPOAuthCallbackRelaysToLogin(t *testing.T) {
	w := newWorld(t)
	a, b := w.replica(t, "a", options{}), w.replica(t, "b", options{})
	tokens := mcp.RedisTokens{Client: w.redis.Client, Prefix: w.redis.Prefix}
	ctx := context.Background()
	if err := tokens.Expect(ctx, "state-1", "github", time.Minute); err != nil {
		t.Fatal(err)
	}
	got := b.client(t).get(mcp.CallbackPath + "?" + url.Values{"state": {"forged"}, "code": {"c0de"}}.Encode())
	if got.status != http.StatusBadRequest || strings.Contains(got.body, "c0de") || strings.Contains(got.body, "forged") {
		t.Fatalf("forged state: %d %s", got.status, got.body)
	}
	ok := url.Values{"state": {"state-1"}, "code": {"the-code"}, "iss": {"https://as.example"}}.Encode()
	if got := b.client(t).get(mcp.CallbackPath + "?" + ok); got.status != http.StatusOK || !strings.Contains(got.body, "Signed in to github") {
		t.Fatalf("answer: %d %s", got.status, got.body)
	}
	if got := a.client(t).get(mcp.CallbackPath + "?" + ok); got.status != http.StatusBadRequest {
		t.Fatalf("replayed on another replica: %d %s", got.status, got.body)
	}
	answer, err := tokens.Await(ctx, "state-1")
	if err != nil || answer.Code != "the-code" || answer.Iss != "https://as.example" {
		t.Fatalf("the login got %+v, %v", answer, err)
	}
}
