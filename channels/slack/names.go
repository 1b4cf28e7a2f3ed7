package slack

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// Names of the room's authors: users.info, cached for nameTTL in Redis
// (shared by every replica; in this process without Redis), a user it
// does not know (or a token without users:read) for unknownNameTTL so
// that each read does not ask again. At most nameLookups calls a read: a
// thread of fifty writers is named in part rather than slowly.

const (
	nameTTL        = 24 * time.Hour
	unknownNameTTL = time.Hour
	nameLookups    = 20
	// maxNameBytes bounds a display name kept (Slack allows 80
	// characters).
	maxNameBytes = 256
)

// roomState is what reading rooms remembers: the names of users, and
// until when each workspace refused reads for its rate limit (a 429's
// Retry-After, shared by every replica through Redis when it is set).
type roomState struct {
	mu     sync.Mutex
	names  map[string]cachedName // team:user → name, without Redis
	limits map[string]time.Time  // team → no read before
	redis  redis.UniversalClient
	prefix string
}

type cachedName struct {
	name    string
	expires time.Time
}

func newRoomState(r redis.UniversalClient, prefix string) *roomState {
	return &roomState{names: map[string]cachedName{}, limits: map[string]time.Time{}, redis: r, prefix: prefix}
}

// limited reports whether team's reads are refused until a time after
// now: by this replica's memory, or by another replica's note in Redis.
func (s *roomState) limited(ctx context.Context, team string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	until, ok := s.limits[team]
	if ok && !now.Before(until) {
		delete(s.limits, team)
		ok = false
	}
	s.mu.Unlock()
	if ok || s.redis == nil {
		return until, ok
	}
	ms, err := s.redis.Get(ctx, s.limitKey(team)).Int64()
	if err != nil || !now.Before(time.UnixMilli(ms)) {
		return time.Time{}, false // none noted, or Redis unreadable: read
	}
	s.limit(ctx, team, now, time.UnixMilli(ms))
	return time.UnixMilli(ms), true
}

// limit refuses team's reads until until, on every replica: the time is
// kept in Redis (by the adapter's clock) until it has passed.
func (s *roomState) limit(ctx context.Context, team string, now, until time.Time) {
	s.mu.Lock()
	if until.After(s.limits[team]) {
		s.limits[team] = until
	}
	s.mu.Unlock()
	if s.redis != nil && until.After(now) {
		// Best effort: without it, each replica learns the limit from
		// its own 429.
		s.redis.Set(ctx, s.limitKey(team), until.UnixMilli(), until.Sub(now))
	}
}

func (s *roomState) limitKey(team string) string { return s.prefix + "slack:room_limited:" + team }

func (s *roomState) key(team, user string) string {
	return s.prefix + "slack:name:" + team + ":" + user
}

// cached returns the names of users known, by user id.
func (s *roomState) cached(ctx context.Context, team string, users []string, now time.Time) (map[string]string, error) {
	out := map[string]string{}
	if s.redis == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, u := range users {
			if c, ok := s.names[team+":"+u]; ok && now.Before(c.expires) {
				out[u] = c.name
			}
		}
		return out, nil
	}
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = s.key(team, u)
	}
	vals, err := s.redis.MGet(ctx, keys...).Result()
	if err != nil {
		return out, err
	}
	for i, v := range vals {
		if name, ok := v.(string); ok {
			out[users[i]] = name
		}
	}
	return out, nil
}

// store remembers names (user id → name; "" for unknown).
func (s *roomState) store(ctx context.Context, team string, names map[string]string, now time.Time) error {
	ttl := func(name string) time.Duration {
		if name == "" {
			return unknownNameTTL
		}
		return nameTTL
	}
	if s.redis == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		for u, name := range names {
			s.names[team+":"+u] = cachedName{name: name, expires: now.Add(ttl(name))}
		}
		return nil
	}
	_, err := s.redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for u, name := range names {
			p.Set(ctx, s.key(team, u), name, ttl(name))
		}
		return nil
	})
	return err
}

// nameAuthors fills in the AuthorName of msgs that have none.
func (a *Adapter) nameAuthors(ctx context.Context, team string, msgs []channels.RoomMessage) {
	var users []string
	for _, m := range msgs {
		if m.AuthorName == "" && m.Author != "" && !m.Bot && !slices.Contains(users, m.Author) {
			users = append(users, m.Author)
		}
	}
	if len(users) == 0 {
		return
	}
	now := a.opts.Now()
	known, err := a.room.cached(ctx, team, users, now)
	if err != nil {
		a.log.Warn("cannot read cached user names", "err", err)
	}
	fresh := map[string]string{}
	for _, u := range users {
		if _, ok := known[u]; ok || len(fresh) == nameLookups {
			continue
		}
		name, err := a.userName(ctx, u)
		if err != nil {
			a.log.Debug("no name for a user of the room", "user", u, "err", err)
			if !errors.Is(err, errUnknownUser) {
				break // rate-limited or down: the rest stay unnamed this time
			}
		}
		fresh[u], known[u] = name, name
	}
	if err := a.room.store(ctx, team, fresh, now); err != nil {
		a.log.Warn("cannot cache user names", "err", err)
	}
	for i := range msgs {
		if msgs[i].AuthorName == "" && !msgs[i].Bot {
			msgs[i].AuthorName = known[msgs[i].Author]
		}
	}
}

// errUnknownUser is a users.info refusal that will not pass by asking
// again soon: the user is unknown, or the token lacks users:read.
var errUnknownUser = errors.New("slack: users.info knows no name")

// userName asks users.info for a user's display name (else real name,
// else handle).
func (a *Adapter) userName(ctx context.Context, user string) (string, error) {
	u, err := a.api.GetUserInfoContext(ctx, user)
	if err != nil {
		a.countAPIError(err)
		var se slackapi.SlackErrorResponse
		if errors.As(err, &se) && se.Err != "ratelimited" {
			return "", errors.Join(errUnknownUser, err)
		}
		return "", err
	}
	return cutText(firstOf(u.Profile.DisplayName, u.RealName, u.Profile.RealName, u.Name), maxNameBytes), nil
}
