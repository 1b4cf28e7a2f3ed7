package channels

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The names of a room's authors: a platform's messages carry user ids,
// and its user API (Slack's users.info, Feishu's contact API) names them.
// NameCache keeps the names it gave for NameTTL in Redis, shared by every
// replica (in this process without Redis), and a user it would not name
// for UnknownNameTTL, so that each read does not ask again. A read asks
// at most NameLookups times: a thread of fifty writers is named in part
// rather than slowly. Each replica also keeps the names it read or gave
// in memory for NameMemoryTTL, so that the same people answered again
// cost no Redis round trip: a renamed user keeps the old name on a
// replica that far, as in Redis for NameTTL already.
const (
	NameTTL        = 24 * time.Hour
	UnknownNameTTL = time.Hour
	NameMemoryTTL  = 5 * time.Minute
	NameLookups    = 20
	// MaxNameBytes bounds a display name kept.
	MaxNameBytes = 256
	// maxNamesInMemory bounds the names a replica keeps in memory.
	maxNamesInMemory = 10000
)

// ErrUnnamed is a lookup's refusal that asking again soon will not
// change (an unknown user, a token without the scope): the user is
// cached as unnamed. Any other error stops the read's lookups.
var ErrUnnamed = errors.New("channels: the platform names no one by this id")

// NameCache is one platform's cache of user names.
type NameCache struct {
	mu     sync.Mutex
	mem    map[string]cachedName // all of it without Redis; in front of it with
	redis  redis.UniversalClient
	prefix string
}

type cachedName struct {
	name    string
	expires time.Time
}

// NewNameCache keeps names under prefix+SPACE+":"+ID in r (nil: in
// memory).
func NewNameCache(r redis.UniversalClient, prefix string) *NameCache {
	return &NameCache{mem: map[string]cachedName{}, redis: r, prefix: prefix}
}

func (c *NameCache) key(space, id string) string { return c.prefix + space + ":" + id }

// Name fills in the AuthorName of msgs that have none and are not the
// bot's, within space (a Slack team, a Feishu tenant): from the cache,
// then from lookup.
func (c *NameCache) Name(ctx context.Context, space string, msgs []RoomMessage, now time.Time, lookup func(context.Context, string) (string, error), log *slog.Logger) {
	var ids []string
	for _, m := range msgs {
		if m.AuthorName == "" && m.Author != "" && !m.Bot && !slices.Contains(ids, m.Author) {
			ids = append(ids, m.Author)
		}
	}
	if len(ids) == 0 {
		return
	}
	known, err := c.get(ctx, space, ids, now)
	if err != nil {
		log.Warn("cannot read cached user names", "err", err)
	}
	fresh := map[string]string{}
	for _, id := range ids {
		if _, ok := known[id]; ok || len(fresh) == NameLookups {
			continue
		}
		name, err := lookup(ctx, id)
		if err != nil {
			log.Debug("no name for an author of the room", "err", err)
			if !errors.Is(err, ErrUnnamed) {
				break // rate-limited or down: the rest stay unnamed this time
			}
		}
		fresh[id], known[id] = name, name
	}
	if err := c.put(ctx, space, fresh, now); err != nil {
		log.Warn("cannot cache user names", "err", err)
	}
	for i := range msgs {
		if msgs[i].AuthorName == "" && !msgs[i].Bot {
			msgs[i].AuthorName = known[msgs[i].Author]
		}
	}
}

// get returns the names known of ids: from memory, then from Redis.
func (c *NameCache) get(ctx context.Context, space string, ids []string, now time.Time) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	c.mu.Lock()
	for _, id := range ids {
		if n, ok := c.mem[c.key(space, id)]; ok && now.Before(n.expires) {
			out[id] = n.name
		} else {
			missing = append(missing, id)
		}
	}
	c.mu.Unlock()
	if c.redis == nil || len(missing) == 0 {
		return out, nil
	}
	keys := make([]string, len(missing))
	for i, id := range missing {
		keys[i] = c.key(space, id)
	}
	vals, err := c.redis.MGet(ctx, keys...).Result()
	if err != nil {
		return out, err
	}
	read := map[string]string{}
	for i, v := range vals {
		if name, ok := v.(string); ok {
			out[missing[i]], read[missing[i]] = name, name
		}
	}
	c.remember(space, read, now, func(string) time.Duration { return NameMemoryTTL })
	return out, nil
}

// remember keeps names in memory, each for ttl(name), within
// maxNamesInMemory: when full, the expired go, and if none had, all.
func (c *NameCache) remember(space string, names map[string]string, now time.Time, ttl func(string) time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mem)+len(names) > maxNamesInMemory {
		maps.DeleteFunc(c.mem, func(_ string, n cachedName) bool { return !now.Before(n.expires) })
		if len(c.mem)+len(names) > maxNamesInMemory {
			clear(c.mem)
		}
	}
	for id, name := range names {
		c.mem[c.key(space, id)] = cachedName{name: name, expires: now.Add(ttl(name))}
	}
}

// put remembers names ("" for a user that could not be named).
func (c *NameCache) put(ctx context.Context, space string, names map[string]string, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	ttl := func(name string) time.Duration {
		if name == "" {
			return UnknownNameTTL
		}
		return NameTTL
	}
	if c.redis == nil {
		c.remember(space, names, now, ttl)
		return nil
	}
	c.remember(space, names, now, func(name string) time.Duration { return min(ttl(name), NameMemoryTTL) })
	_, err := c.redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, name := range names {
			p.Set(ctx, c.key(space, id), name, ttl(name))
		}
		return nil
	})
	return err
}
