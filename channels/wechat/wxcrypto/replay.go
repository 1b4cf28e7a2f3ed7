package wxcrypto

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReasonReplayed is a callback whose signed query was already accepted
// with another body.
const ReasonReplayed = "replayed"

// Replays refuses a callback whose query — timestamp, nonce and
// signature — was accepted before with another body, on any replica.
//
// In an Official Account's plaintext mode the signature signs the token,
// timestamp and nonce only: without this, one captured callback URL
// would be accepted with any body for as long as its timestamp is fresh.
// The encrypted modes sign the ciphertext, but not the envelope around
// it, so they are checked the same way. A platform's retry repeats the
// request whole, body and all, and is still accepted; the gateway drops it
// as a duplicate of its MsgId.
type Replays struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewReplays remembers accepted callbacks in client under prefix (the
// configured key prefix, the platform and the account) for twice window:
// Fresh accepts a timestamp from window before the clock to window after
// it, so a query stays acceptable that long after it is first seen.
func NewReplays(client redis.UniversalClient, prefix string, window time.Duration) *Replays {
	return &Replays{client: client, prefix: prefix, ttl: 2 * window}
}

// firstScript sets the query's key to the body's digest unless it is set,
// and answers whether the key holds that digest.
var firstScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
`)

// Key is the Redis key of q's signed parameters.
func (r *Replays) Key(q Query) string {
	h := sha256.New()
	for _, p := range []string{q.Timestamp, q.Nonce, q.Signature, q.MsgSignature} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return r.prefix + "seen:" + hex.EncodeToString(h.Sum(nil))
}

// Check refuses (ErrRefused, ReasonReplayed) a callback whose query was
// accepted with another body. Call it once the query's signature holds.
// Any other error is Redis failing: answer it as a failure the platform
// retries, not as a refusal.
func (r *Replays) Check(ctx context.Context, q Query, body []byte) error {
	sum := sha256.Sum256(body)
	ok, err := firstScript.Run(ctx, r.client, []string{r.Key(q)}, hex.EncodeToString(sum[:]), r.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("wxcrypto: record the callback: %w", err)
	}
	if ok != 1 {
		return refuse(ReasonReplayed, "the signed query was already accepted with another body")
	}
	return nil
}
