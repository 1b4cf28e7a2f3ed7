package bench

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/parleybin"
)

// TestSmoke runs the whole bench once, briefly: 50 messages over 32
// threads through a real parley serve and redis-server.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs parley serve and redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := Options{Parley: parleybin.Path(t), Threads: 32, Messages: 50, Runs: 1, Timeout: 30 * time.Second}
	r, err := runOnce(ctx, o, 8)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost != 0 || r.Doubled != 0 || r.Misrouted != 0 {
		t.Fatalf("lost %d, doubled %d, misrouted %d", r.Lost, r.Doubled, r.Misrouted)
	}
	if len(r.E2E) != 50 || len(r.Ack) != 50 {
		t.Fatalf("%d end-to-end and %d ack samples for 50 messages", len(r.E2E), len(r.Ack))
	}
	if r.RedisWritesPerMessage < 1 || r.IdleRSS == 0 || r.ModelConns < 1 || r.SlackConns < 1 {
		t.Fatalf("implausible figures: %+v", r)
	}
	var out bytes.Buffer
	printRun(&out, 1, r)
	printMedians(&out, []Result{r})
	for _, want := range []string{"e2e p50", "CPU", "idle RSS", "lost 0, doubled 0, misrouted 0", "median of 1 runs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
