package sessions

import "sync"

// A claim whose reply was lost on the way back (Redis killed, a
// connection cut) may have taken the lock: the script ran, its answer
// never came. A claim sent again with a new token would then find the
// lock held — by the claimant itself, which no longer knows it — and the
// conversation would wait for the lock to expire, a whole lock TTL after
// Redis came back. So the token of a claim that failed that way is kept
// and sent again with the next claim of that conversation, and the claim
// script takes a lock that holds its own token as taken.

// maxUncertainClaims bounds the tokens kept: a conversation never claimed
// again leaves its entry behind until this many have piled up.
const maxUncertainClaims = 10_000

// uncertainClaims are the tokens of failed claims, by conversation.
type uncertainClaims struct {
	mu     sync.Mutex
	tokens map[string]string
}

// take returns (and forgets) the token of conv's failed claim, if any.
func (u *uncertainClaims) take(conv string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.tokens[conv]
	delete(u.tokens, conv)
	return t, ok
}

// keep remembers token as conv's failed claim.
func (u *uncertainClaims) keep(conv, token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tokens == nil || len(u.tokens) >= maxUncertainClaims {
		u.tokens = map[string]string{}
	}
	u.tokens[conv] = token
}

// claimToken is the token of conv's next claim: a failed claim's, else a
// new one.
func (s *RedisStore) claimToken(conv string) (string, error) {
	if t, ok := s.uncertain.take(conv); ok {
		return t, nil
	}
	return newToken()
}
