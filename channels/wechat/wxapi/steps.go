package wxapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
)

// Steps are the steps of sending one file (its delivery key) done so far,
// kept in Redis so that every try, on any replica, goes on from them: the
// media uploaded, the message sent. Neither platform can be asked
// whether a message was sent, so this is what stops a try from doing a
// step again.
type Steps struct {
	r   redis.UniversalClient
	key string // the hash holding them
	ttl time.Duration
}

// NewSteps are the steps of delivery key, in a hash under prefix, kept
// for ttl after the last one.
func NewSteps(r redis.UniversalClient, prefix, key string, ttl time.Duration) Steps {
	sum := sha256.Sum256([]byte(key))
	return Steps{r: r, key: prefix + hex.EncodeToString(sum[:16]), ttl: ttl}
}

// Do is the result of step: the one an earlier try (of any replica)
// recorded, or do's, recorded unless another try recorded one first (then
// that one is taken, so every try goes on with the same media). A Redis
// failure before the step fails it (going on blind could send the file
// twice) as a failure another try may mend.
func (s Steps) Do(ctx context.Context, step string, do func() (string, error)) (string, error) {
	v, err := s.r.HGet(ctx, s.key, step).Result()
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", &channels.PostError{Retry: true, Err: fmt.Errorf("read the steps of a file: %w", err)}
	}
	v, err = do()
	if err != nil {
		return "", err
	}
	pipe := s.r.TxPipeline()
	pipe.HSetNX(ctx, s.key, step, v)
	pipe.Expire(ctx, s.key, s.ttl)
	got := pipe.HGet(ctx, s.key, step)
	if _, err := pipe.Exec(ctx); err != nil {
		// Done on the platform but not recorded: a later try does the step
		// again.
		return v, nil
	}
	return got.Val(), nil
}

// MayHaveLanded reports whether a failed call may have been done by the
// platform all the same: no answer came to a request that was sent.
func MayHaveLanded(err error) bool {
	var terr *transportError
	return errors.As(err, &terr) && !terr.unsent && !errors.Is(err, errBadResponse)
}
