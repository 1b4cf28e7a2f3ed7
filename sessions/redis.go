package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenRedis connects to the Redis a URL names and checks that it answers.
// A URL with master_name=… is a Sentinel deployment (the host and any
// addr=… parameters are the sentinels); one with addr=… parameters and no
// master name is a Cluster (the host and the addrs are seed nodes); anything
// else is a single server. redis://, rediss:// and unix:// are accepted.
func OpenRedis(ctx context.Context, rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("sessions: REDIS_URL is not a valid URL") // the URL may hold a password: never echo it
	}
	q := u.Query()
	var client redis.UniversalClient
	switch {
	case q.Has("master_name"):
		opts, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: sentinel URL: %w", scrub(err, rawURL))
		}
		client = redis.NewFailoverClient(opts)
	case q.Has("addr"):
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: cluster URL: %w", scrub(err, rawURL))
		}
		client = redis.NewClusterClient(opts)
	default:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: redis URL: %w", scrub(err, rawURL))
		}
		client = redis.NewClient(opts)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("sessions: redis at %s does not answer: %w", u.Host, err)
	}
	return client, nil
}

// scrub keeps a parse error from carrying the URL (and its password).
func scrub(err error, rawURL string) error {
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			return errors.New(strings.ReplaceAll(err.Error(), p, "xxxxx"))
		}
	}
	return err
}

// RedisStore implements Store on any go-redis client: a single server,
// Sentinel, Cluster, or the embedded server of NewMemory.
type RedisStore struct {
	client redis.UniversalClient
	opts   Options
	onStop func() // stops an embedded server, if any
}

// NewRedis returns a Store on client. The caller keeps owning client unless
// it calls Close on the store.
func NewRedis(client redis.UniversalClient, opts Options) *RedisStore {
	return &RedisStore{client: client, opts: opts.withDefaults()}
}

// Client exposes the connection for the other packages that keep shared
// state in the same Redis (skill state, reload announcements).
func (s *RedisStore) Client() redis.UniversalClient { return s.client }

// Prefix is the configured key prefix.
func (s *RedisStore) Prefix() string { return s.opts.Prefix }

func (s *RedisStore) key(conv, kind string) string {
	return s.opts.Prefix + "conv:{" + conv + "}:" + kind
}

// History implements Store.
func (s *RedisStore) History(ctx context.Context, conv string) ([]Message, error) {
	raw, err := s.client.LRange(ctx, s.key(conv, "history"), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("sessions: read history: %w", err)
	}
	msgs := make([]Message, 0, len(raw))
	for i, r := range raw {
		var m Message
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			return nil, fmt.Errorf("sessions: history entry %d is not a message: %w", i, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// commitScript appends a turn, acknowledges the inbox item and refreshes the
// TTL, but only while the caller still owns the lock: a holder whose lock
// expired must not write a turn another replica may already be writing.
var commitScript = redis.NewScript(`
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
if ARGV[4] ~= '' and redis.call('LINDEX', KEYS[2], 0) == ARGV[4] then
  redis.call('LPOP', KEYS[2])
end
local n
if #ARGV > 4 then
  n = redis.call('RPUSH', KEYS[1], unpack(ARGV, 5))
else
  n = redis.call('LLEN', KEYS[1])
end
local max = tonumber(ARGV[3])
local trimmed = 0
if n > max then
  redis.call('LTRIM', KEYS[1], -max, -1)
  trimmed = 1
end
if n > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return trimmed
`)

// CommitTurn implements Store.
func (s *RedisStore) CommitTurn(ctx context.Context, lock *Lock, msgs []Message, item []byte) (bool, error) {
	args := make([]any, 0, 4+len(msgs))
	args = append(args, lock.token, s.opts.HistoryTTL.Milliseconds(), s.opts.MaxMessages, item)
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return false, fmt.Errorf("sessions: encode message: %w", err)
		}
		args = append(args, b)
	}
	keys := []string{s.key(lock.conv, "history"), s.key(lock.conv, "inbox"), s.key(lock.conv, "lock")}
	res, err := commitScript.Run(ctx, s.client, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("sessions: commit turn: %w", err)
	}
	if res < 0 {
		return false, ErrLockLost
	}
	return res == 1, nil
}

var replaceScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
if #ARGV > 2 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// ReplaceHistory implements Store.
func (s *RedisStore) ReplaceHistory(ctx context.Context, lock *Lock, msgs []Message) error {
	args := []any{lock.token, s.opts.HistoryTTL.Milliseconds()}
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("sessions: encode message: %w", err)
		}
		args = append(args, b)
	}
	res, err := replaceScript.Run(ctx, s.client, []string{s.key(lock.conv, "history"), s.key(lock.conv, "lock")}, args...).Int()
	if err != nil {
		return fmt.Errorf("sessions: replace history: %w", err)
	}
	if res < 0 {
		return ErrLockLost
	}
	return nil
}

// Clear implements Store.
func (s *RedisStore) Clear(ctx context.Context, conv string) error {
	if err := s.client.Del(ctx, s.key(conv, "history")).Err(); err != nil {
		return fmt.Errorf("sessions: clear history: %w", err)
	}
	return nil
}

// enqueueScript appends to the inbox only below the limit, so that the
// check and the append cannot be split by another replica's append. The
// inbox expires with the history: an abandoned queue does not live forever.
var enqueueScript = redis.NewScript(`
local n = redis.call('LLEN', KEYS[1])
if n >= tonumber(ARGV[2]) then return -1 end
n = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return n
`)

// Enqueue implements Store.
func (s *RedisStore) Enqueue(ctx context.Context, conv string, item []byte, limit int) (int64, error) {
	n, err := enqueueScript.Run(ctx, s.client, []string{s.key(conv, "inbox")}, item, limit, s.opts.HistoryTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("sessions: enqueue: %w", err)
	}
	if n < 0 {
		return 0, ErrQueueFull
	}
	return n, nil
}

// Head implements Store.
func (s *RedisStore) Head(ctx context.Context, conv string) ([]byte, bool, error) {
	b, err := s.client.LIndex(ctx, s.key(conv, "inbox"), 0).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sessions: inbox head: %w", err)
	}
	return b, true, nil
}

var ackScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('LINDEX', KEYS[1], 0) == ARGV[2] then redis.call('LPOP', KEYS[1]) end
return 0
`)

// Ack implements Store.
func (s *RedisStore) Ack(ctx context.Context, lock *Lock, item []byte) error {
	res, err := ackScript.Run(ctx, s.client, []string{s.key(lock.conv, "inbox"), s.key(lock.conv, "lock")}, lock.token, item).Int()
	if err != nil {
		return fmt.Errorf("sessions: ack: %w", err)
	}
	if res < 0 {
		return ErrLockLost
	}
	return nil
}

// Orphans implements Store. It scans every master of a Cluster.
func (s *RedisStore) Orphans(ctx context.Context) ([]string, error) {
	pattern := s.opts.Prefix + "conv:{*}:inbox"
	var inboxes []string
	var mu sync.Mutex
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			inboxes = append(inboxes, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		iter := s.client.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			inboxes = append(inboxes, iter.Val())
		}
		err = iter.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("sessions: scan queues: %w", err)
	}
	var orphans []string
	for _, key := range inboxes {
		conv := strings.TrimSuffix(strings.TrimPrefix(key, s.opts.Prefix+"conv:{"), "}:inbox")
		// Two keys of one slot: EXISTS on the lock, LLEN on the inbox.
		pipe := s.client.Pipeline()
		locked := pipe.Exists(ctx, s.key(conv, "lock"))
		depth := pipe.LLen(ctx, key)
		if _, err := pipe.Exec(ctx); err != nil {
			return orphans, fmt.Errorf("sessions: inspect queue: %w", err)
		}
		if locked.Val() == 0 && depth.Val() > 0 {
			orphans = append(orphans, conv)
		}
	}
	return orphans, nil
}

// Seen implements Store.
func (s *RedisStore) Seen(ctx context.Context, scope, id string) (bool, error) {
	ok, err := s.client.SetNX(ctx, s.opts.Prefix+"dedupe:"+scope+":"+id, 1, s.opts.DedupeTTL).Result()
	if err != nil {
		return false, fmt.Errorf("sessions: dedupe: %w", err)
	}
	return !ok, nil
}

// Forget implements Store.
func (s *RedisStore) Forget(ctx context.Context, scope, id string) error {
	if err := s.client.Del(ctx, s.opts.Prefix+"dedupe:"+scope+":"+id).Err(); err != nil {
		return fmt.Errorf("sessions: forget dedupe: %w", err)
	}
	return nil
}

// Ping implements Store.
func (s *RedisStore) Ping(ctx context.Context) error {
	return s.client.Ping(ctx).Err()
}

// Close implements Store.
func (s *RedisStore) Close() error {
	err := s.client.Close()
	if s.onStop != nil {
		s.onStop()
	}
	return err
}

// Lock is a conversation lock with an owner token. It renews itself every
// third of its TTL until Release or until the context it was taken with
// ends (then it expires within one TTL, unless released first); if a
// renewal finds the lock gone, Lost reports it and the holder's next write
// fails with ErrLockLost.
type Lock struct {
	store *RedisStore
	conv  string
	token string

	stop     context.CancelFunc // ends the renewal
	done     chan struct{}      // closed when the renewal has returned
	mu       sync.Mutex
	lost     bool
	released bool
}

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// TryLock implements Store.
func (s *RedisStore) TryLock(ctx context.Context, conv string) (*Lock, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("sessions: lock token: %w", err)
	}
	token := hex.EncodeToString(b[:])
	ok, err := s.client.SetNX(ctx, s.key(conv, "lock"), token, s.opts.LockTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("sessions: lock: %w", err)
	}
	if !ok {
		return nil, ErrLocked
	}
	rctx, stop := context.WithCancel(ctx)
	l := &Lock{store: s, conv: conv, token: token, stop: stop, done: make(chan struct{})}
	go l.renew(rctx)
	return l, nil
}

// Conversation is the key the lock holds.
func (l *Lock) Conversation() string { return l.conv }

// renew extends the lock every third of its TTL until ctx ends (Release,
// or the holder's context).
func (l *Lock) renew(ctx context.Context) {
	defer close(l.done)
	every := l.store.opts.LockTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, every)
			n, err := renewScript.Run(rctx, l.store.client, []string{l.store.key(l.conv, "lock")}, l.token, l.store.opts.LockTTL.Milliseconds()).Int()
			cancel()
			if err == nil && n == 0 {
				l.mu.Lock()
				l.lost = true
				l.mu.Unlock()
				return
			}
			// A transient error is retried on the next tick; the TTL
			// leaves two more chances before the lock can expire.
		}
	}
}

// Lost reports whether a renewal found the lock taken or expired.
func (l *Lock) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Release stops renewal and deletes the lock if this holder still owns it.
// It is safe to call more than once.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	if err := releaseScript.Run(ctx, l.store.client, []string{l.store.key(l.conv, "lock")}, l.token).Err(); err != nil {
		return fmt.Errorf("sessions: release lock: %w", err)
	}
	return nil
}
