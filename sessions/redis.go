package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenRedis connects to the Redis a URL names and checks that it answers.
// A URL with master_name=… is a Sentinel deployment (the host and any
// addr=… parameters are the sentinels); one with addr=… parameters and no
// master name is a Cluster (the host and the addrs are seed nodes); anything
// else is a single server. redis://, rediss:// and unix:// are accepted.
//
// conns is how many commands the process may have waiting for Redis at
// once (its workers, its webhook handlers and what they start): the
// connection pool (per node, on a Cluster) holds at least that many,
// unless the URL sets pool_size. go-redis's default, 10 per CPU, is 20 on
// two cores, where 16 workers and 32 webhook handlers wait for a
// connection (WaitCount) before their command is even sent. 0 keeps the
// default.
func OpenRedis(ctx context.Context, rawURL string, conns int) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("sessions: REDIS_URL is not a valid URL") // the URL may hold a password: never echo it
	}
	q := u.Query()
	pool := 0
	if !q.Has("pool_size") && conns > 0 {
		pool = max(conns, 10*runtime.GOMAXPROCS(0))
	}
	var client redis.UniversalClient
	switch {
	case q.Has("master_name"):
		opts, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: sentinel URL: %w", scrub(err, rawURL))
		}
		if pool > 0 {
			opts.PoolSize = pool
		}
		client = redis.NewFailoverClient(opts)
	case q.Has("addr"):
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: cluster URL: %w", scrub(err, rawURL))
		}
		if pool > 0 {
			opts.PoolSize = pool
		}
		client = redis.NewClusterClient(opts)
	default:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("sessions: redis URL: %w", scrub(err, rawURL))
		}
		if pool > 0 {
			opts.PoolSize = pool
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

// scrub keeps a parse error from carrying the URL's credentials: the
// password of its userinfo and of its password= and sentinel_password=
// parameters.
func scrub(err error, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return err
	}
	msg := err.Error()
	var secrets []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	for name, vals := range u.Query() {
		if strings.Contains(strings.ToLower(name), "pass") {
			secrets = append(secrets, vals...)
		}
	}
	for _, p := range secrets {
		if p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
			msg = strings.ReplaceAll(msg, url.QueryEscape(p), "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// RedisStore implements Store on any go-redis client: a single server,
// Sentinel, Cluster, or the embedded server of NewMemory.
type RedisStore struct {
	client redis.UniversalClient
	opts   Options
	onStop func() // stops an embedded server, if any
	// uncertain keeps the tokens of claims whose reply was lost
	// (claimtoken.go).
	uncertain *uncertainClaims
}

// NewRedis returns a Store on client. The caller keeps owning client unless
// it calls Close on the store.
func NewRedis(client redis.UniversalClient, opts Options) *RedisStore {
	return &RedisStore{client: client, opts: opts.withDefaults(), uncertain: &uncertainClaims{}}
}

// Client exposes the connection for the other packages that keep shared
// state in the same Redis (skill state, reload announcements).
func (s *RedisStore) Client() redis.UniversalClient { return s.client }

// Prefix is the configured key prefix.
func (s *RedisStore) Prefix() string { return s.opts.Prefix }

// Key is the Redis key of conv's part kind ("lock", "inbox", …), for the
// packages that keep more state of a conversation under its hash tag, so
// that their scripts run on its slot.
func (s *RedisStore) Key(conv, kind string) string { return s.key(conv, kind) }

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
		lock.markLost()
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

// Seen implements Store.
func (s *RedisStore) Seen(ctx context.Context, scope, id string) (bool, error) {
	ok, err := s.client.SetNX(ctx, s.opts.Prefix+"dedupe:"+scope+":"+id, 1, s.opts.DedupeTTL).Result()
	if err != nil {
		return false, fmt.Errorf("sessions: dedupe: %w", err)
	}
	return !ok, nil
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
