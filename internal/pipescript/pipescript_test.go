package pipescript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/internal/pipescript"
	"github.com/parleyhq/parley/internal/redistest"
)

// incr counts its runs in KEYS[1], or fails after counting when ARGV[1]
// says so: a script that may have run must not be sent again.
var incr = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if ARGV[1] == 'fail' then return redis.error_reply('ERR told to fail') end
return n
`)

// TestQueueRunsTheScriptOnce: whether Redis knows the script, has
// forgotten it (NOSCRIPT: run alone afterwards), or the script fails (not
// sent again), it runs exactly once, and a write beside it in the pipeline
// lands.
func TestQueueRunsTheScriptOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		forget  bool
		arg     string
		wantErr bool
	}{
		{name: "known", arg: "ok"},
		{name: "forgotten", forget: true, arg: "ok"},
		{name: "fails", arg: "fail", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := redistest.New(t)
			if tc.forget {
				r = redistest.NewOwn(t) // its SCRIPT FLUSH is of the whole server
			}
			key, beside := r.Prefix+"runs", r.Prefix+"beside"
			if err := incr.Load(ctx, r.Client).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.forget {
				if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			p := r.Client.Pipeline()
			result := pipescript.Queue(ctx, p, r.Client, incr, []string{key}, tc.arg)
			p.Set(ctx, beside, "1", 0)
			_, _ = p.Exec(ctx)
			n, err := result(ctx).Int64()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("reply %d, want the script's error", n)
				}
			} else if err != nil || n != 1 {
				t.Fatalf("reply %d, %v; want 1", n, err)
			}
			if runs, _ := r.Client.Get(ctx, key).Int(); runs != 1 {
				t.Errorf("the script ran %d times, want once", runs)
			}
			if r.Client.Exists(ctx, beside).Val() != 1 {
				t.Error("the write beside the script did not land")
			}
		})
	}
}
