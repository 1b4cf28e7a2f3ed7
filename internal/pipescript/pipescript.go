// Package pipescript sends a Redis script in a pipeline that carries
// other writes, so that it costs no round trip of its own.
//
// A pipeline can only send a script by its SHA (EVALSHA): loading it would
// be a round trip of its own. A Redis that restarted has forgotten its
// scripts and refuses that command with NOSCRIPT, which means the script
// did not run; it is then run once by itself, which cannot write twice.
// Any other failure is the caller's to report, never a reason to send the
// script again: it may have run.
package pipescript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Queue adds s with keys and args to p. Once p has run, result returns
// the script's reply, from p or, when Redis did not know the script, from
// running it alone through c.
func Queue(ctx context.Context, p redis.Pipeliner, c redis.Scripter, s *redis.Script, keys []string, args ...any) (result func(context.Context) *redis.Cmd) {
	cmd := s.EvalSha(ctx, p, keys, args...)
	return func(ctx context.Context) *redis.Cmd {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			return s.Run(ctx, c, keys, args...)
		}
		return cmd
	}
}
