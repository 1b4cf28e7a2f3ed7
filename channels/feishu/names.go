package feishu

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
)

// Names of the room's senders. The message list gives only open_ids; the
// names of people mentioned come with the mentions, and the others from
// the contact API (GET /open-apis/contact/v3/users/:open_id, which needs
// contact:user.base:readonly and the user within the app's contact
// range), cached for nameTTL in Redis (shared by every replica; in this
// process without Redis). A user the API will not name is cached as
// unnamed for unknownNameTTL, so that each read does not ask again. At
// most nameLookups calls a read.

const (
	nameTTL        = 24 * time.Hour
	unknownNameTTL = time.Hour
	nameLookups    = 20
	maxNameBytes   = 256
)

type nameCache struct {
	mu    sync.Mutex
	mem   map[string]cachedName // without Redis
	redis redis.UniversalClient
	pfx   string
}

type cachedName struct {
	name    string
	expires time.Time
}

func newNameCache(r redis.UniversalClient, prefix string) *nameCache {
	return &nameCache{mem: map[string]cachedName{}, redis: r, pfx: prefix}
}

func (c *nameCache) key(tenant, id string) string { return c.pfx + "feishu:name:" + tenant + ":" + id }

// get returns the names known of ids.
func (c *nameCache) get(ctx context.Context, tenant string, ids []string, now time.Time) (map[string]string, error) {
	out := map[string]string{}
	if c.redis == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			if n, ok := c.mem[tenant+":"+id]; ok && now.Before(n.expires) {
				out[id] = n.name
			}
		}
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = c.key(tenant, id)
	}
	vals, err := c.redis.MGet(ctx, keys...).Result()
	if err != nil {
		return out, err
	}
	for i, v := range vals {
		if name, ok := v.(string); ok {
			out[ids[i]] = name
		}
	}
	return out, nil
}

// put remembers names ("" for a user that could not be named).
func (c *nameCache) put(ctx context.Context, tenant string, names map[string]string, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	ttl := func(name string) time.Duration {
		if name == "" {
			return unknownNameTTL
		}
		return nameTTL
	}
	if c.redis == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		for id, name := range names {
			c.mem[tenant+":"+id] = cachedName{name: name, expires: now.Add(ttl(name))}
		}
		return nil
	}
	_, err := c.redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, name := range names {
			p.Set(ctx, c.key(tenant, id), name, ttl(name))
		}
		return nil
	})
	return err
}

// nameSenders fills in the AuthorName of msgs: from the mentions seen
// (known), the cache, then the contact API.
func (a *Adapter) nameSenders(ctx context.Context, tenant string, msgs []channels.RoomMessage, known map[string]string) {
	var ids []string
	for _, m := range msgs {
		if _, ok := known[m.Author]; !ok && m.Author != "" && !m.Bot && !slices.Contains(ids, m.Author) && isOpenID(m.Author) {
			ids = append(ids, m.Author)
		}
	}
	now := a.opts.Now()
	if len(ids) > 0 {
		cached, err := a.names.get(ctx, tenant, ids, now)
		if err != nil {
			a.log.Warn("cannot read cached user names", "err", err)
		}
		fresh := map[string]string{}
		for _, id := range ids {
			if name, ok := cached[id]; ok {
				known[id] = name
				continue
			}
			if len(fresh) == nameLookups {
				continue
			}
			name, err := a.contactName(ctx, id)
			if err != nil && !errors.Is(err, errUnnamed) {
				a.log.Debug("no name for a sender of the room", "err", err)
				break // rate-limited or down: the rest stay unnamed this time
			}
			fresh[id], known[id] = name, name
		}
		if err := a.names.put(ctx, tenant, fresh, now); err != nil {
			a.log.Warn("cannot cache user names", "err", err)
		}
	}
	for i := range msgs {
		if msgs[i].AuthorName == "" && !msgs[i].Bot {
			msgs[i].AuthorName = known[msgs[i].Author]
		}
	}
}

// errUnnamed is a contact lookup refused for good: no permission, a user
// outside the app's contact range, an unknown user.
var errUnnamed = errors.New("feishu: the contact API names no one")

// contactName asks the contact API for a user's name.
func (a *Adapter) contactName(ctx context.Context, openID string) (string, error) {
	var out struct {
		Data struct {
			User struct {
				Name string `json:"name"`
			} `json:"user"`
		} `json:"data"`
	}
	err := a.callN(ctx, 1, "contact_user", "GET", "/open-apis/contact/v3/users/:user_id",
		map[string]string{"user_id": openID}, map[string]string{"user_id_type": "open_id"}, nil, &out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && !apiErr.Retryable() {
		return "", errors.Join(errUnnamed, err)
	}
	if err != nil {
		return "", err
	}
	return cut(out.Data.User.Name, maxNameBytes), nil
}
