package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Grant is a server's sign-in: its tokens, and what refreshing them
// needs. It is kept in a TokenStore, shared by every replica, and never
// printed: its String shows none of it.
type Grant struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Resource is the server URL the tokens were issued for (the resource
	// indicator); they are never sent to another.
	Resource string `json:"resource"`
	// TokenURL, ClientID, ClientSecret and AuthStyle are how to refresh:
	// the client may have been registered dynamically at sign-in.
	TokenURL     string   `json:"token_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret,omitempty"`
	BasicAuth    bool     `json:"basic_auth,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// Lapsed says why the sign-in no longer works (a refresh refused, the
	// server wanting more scopes); empty while it does.
	Lapsed string `json:"lapsed,omitempty"`
	// Wanted are scopes the server asked for beyond Scopes (step-up): the
	// next sign-in asks for them too.
	Wanted []string `json:"wanted,omitempty"`
}

// String never shows a token.
func (g *Grant) String() string { return "mcp.Grant{…}" }

// expiresWithin reports whether the access token ends within d.
func (g *Grant) expiresWithin(d time.Duration) bool {
	return !g.Expiry.IsZero() && time.Until(g.Expiry) < d
}

// TokenStore keeps the servers' sign-ins where every replica finds them,
// and relays an operator's sign-in from the admin console to the `parley
// mcp login` waiting for it.
type TokenStore interface {
	// Load returns the server's grant, or nil when it has none.
	Load(ctx context.Context, server string) (*Grant, error)
	Save(ctx context.Context, server string, g *Grant) error
	// Lock takes the server's refresh lock for at most ttl, so one replica
	// at a time refreshes; ok is false when another holds it.
	Lock(ctx context.Context, server string, ttl time.Duration) (release func(), ok bool, err error)

	// Expect records that a sign-in for server with this state is under
	// way, for ttl.
	Expect(ctx context.Context, state, server string, ttl time.Duration) error
	// Deliver hands the authorization server's answer (code, iss) for
	// state to the waiting sign-in, once: it returns the server's name,
	// or ErrUnknownState for a state no sign-in expects (forged, or used).
	Deliver(ctx context.Context, state string, answer Answer) (server string, err error)
	// Await waits for the answer for state until ctx ends.
	Await(ctx context.Context, state string) (Answer, error)
}

// Answer is what the authorization server's redirect carried.
type Answer struct {
	Code string `json:"code"`
	Iss  string `json:"iss,omitempty"`
	// Error and Description are the redirect's error, when the operator
	// or the authorization server refused.
	Error       string `json:"error,omitempty"`
	Description string `json:"error_description,omitempty"`
}

// ErrUnknownState is Deliver's answer for a state no sign-in expects.
var ErrUnknownState = errors.New("no sign-in is waiting for this answer (it expired, was already used, or never started)")

// RedisTokens is the TokenStore of a deployment: grants under
// PREFIX mcp:oauth:grant:SERVER, the refresh lock beside them, sign-ins
// under way for ten minutes at most.
type RedisTokens struct {
	Client redis.UniversalClient
	Prefix string
}

var _ TokenStore = RedisTokens{}

func (r RedisTokens) key(parts ...string) string {
	k := r.Prefix + "mcp:oauth"
	for _, p := range parts {
		k += ":" + p
	}
	return k
}

func (r RedisTokens) Load(ctx context.Context, server string) (*Grant, error) {
	data, err := r.Client.Get(ctx, r.key("grant", server)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp: loading the sign-in of %s: %w", server, err)
	}
	var g Grant
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("mcp: the stored sign-in of %s does not decode", server)
	}
	return &g, nil
}

func (r RedisTokens) Save(ctx context.Context, server string, g *Grant) error {
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := r.Client.Set(ctx, r.key("grant", server), data, 0).Err(); err != nil {
		return fmt.Errorf("mcp: saving the sign-in of %s: %w", server, err)
	}
	return nil
}

// releaseLock deletes the lock only while it is still this holder's.
var releaseLock = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

func (r RedisTokens) Lock(ctx context.Context, server string, ttl time.Duration) (func(), bool, error) {
	key, holder := r.key("lock", server), rand.Text()
	ok, err := r.Client.SetNX(ctx, key, holder, ttl).Result()
	if err != nil || !ok {
		return func() {}, false, err
	}
	return func() { releaseLock.Run(context.WithoutCancel(ctx), r.Client, []string{key}, holder) }, true, nil
}

func (r RedisTokens) Expect(ctx context.Context, state, server string, ttl time.Duration) error {
	return r.Client.Set(ctx, r.key("state", state), server, ttl).Err()
}

func (r RedisTokens) Deliver(ctx context.Context, state string, a Answer) (string, error) {
	server, err := r.Client.GetDel(ctx, r.key("state", state)).Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrUnknownState
	}
	if err != nil {
		return "", err
	}
	data, _ := json.Marshal(a)
	key := r.key("answer", state)
	if _, err := r.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, key, data)
		p.Expire(ctx, key, loginTimeout)
		return nil
	}); err != nil {
		return "", err
	}
	return server, nil
}

func (r RedisTokens) Await(ctx context.Context, state string) (Answer, error) {
	key := r.key("answer", state)
	for {
		res, err := r.Client.BLPop(ctx, 5*time.Second, key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			if ctx.Err() != nil {
				return Answer{}, ctx.Err()
			}
			continue
		case err != nil:
			return Answer{}, err
		}
		var a Answer
		if err := json.Unmarshal([]byte(res[1]), &a); err != nil {
			return Answer{}, err
		}
		return a, nil
	}
}

// MemoryTokens is a TokenStore for one process (tests, the conformance
// harness): what it holds no other replica sees.
type MemoryTokens struct {
	mu      sync.Mutex
	grants  map[string]Grant
	locks   map[string]bool
	states  map[string]string
	answers map[string]chan Answer
}

var _ TokenStore = (*MemoryTokens)(nil)

func (m *MemoryTokens) init() {
	if m.grants == nil {
		m.grants, m.locks, m.states, m.answers = map[string]Grant{}, map[string]bool{}, map[string]string{}, map[string]chan Answer{}
	}
}

func (m *MemoryTokens) Load(_ context.Context, server string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	g, ok := m.grants[server]
	if !ok {
		return nil, nil
	}
	return &g, nil
}

func (m *MemoryTokens) Save(_ context.Context, server string, g *Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	m.grants[server] = *g
	return nil
}

func (m *MemoryTokens) Lock(_ context.Context, server string, _ time.Duration) (func(), bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if m.locks[server] {
		return func() {}, false, nil
	}
	m.locks[server] = true
	return func() {
		m.mu.Lock()
		delete(m.locks, server)
		m.mu.Unlock()
	}, true, nil
}

func (m *MemoryTokens) Expect(_ context.Context, state, server string, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	m.states[state] = server
	m.answers[state] = make(chan Answer, 1)
	return nil
}

func (m *MemoryTokens) Deliver(_ context.Context, state string, a Answer) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	server, ok := m.states[state]
	if !ok {
		return "", ErrUnknownState
	}
	delete(m.states, state)
	m.answers[state] <- a
	return server, nil
}

func (m *MemoryTokens) Await(ctx context.Context, state string) (Answer, error) {
	m.mu.Lock()
	m.init()
	ch := m.answers[state]
	m.mu.Unlock()
	if ch == nil {
		return Answer{}, ErrUnknownState
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}
