package slack

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// Names of the room's authors come from users.info, cached by a
// channels.NameCache (names).

// roomState is what reading rooms remembers: the names of users, and
// until when each workspace refused reads for its rate limit (a 429's
// Retry-After, shared by every replica through Redis when it is set).
type roomState struct {
	names  *channels.NameCache
	mu     sync.Mutex
	limits map[string]time.Time // team → no read before
	// unlimited is when Redis last said a team's reads were not refused:
	// it is asked again limitRecheck later, not on every read.
	unlimited map[string]time.Time
	redis     redis.UniversalClient
	prefix    string
}

// limitRecheck is how long a replica trusts Redis's word that no
// replica noted a rate limit for a workspace. A read costs a Redis round
// trip less for each message answered within it; a limit another replica
// noted meanwhile costs this one at most a refused call of its own,
// which notes the limit here too.
const limitRecheck = time.Second

// maxTeamsRemembered bounds the unlimited map of an app installed in
// many workspaces.
const maxTeamsRemembered = 10000

func newRoomState(r redis.UniversalClient, prefix string) *roomState {
	return &roomState{names: channels.NewNameCache(r, prefix+"slack:name:"), limits: map[string]time.Time{},
		unlimited: map[string]time.Time{}, redis: r, prefix: prefix}
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
	checked, recent := s.unlimited[team]
	recent = recent && !now.Before(checked) && now.Sub(checked) < limitRecheck
	s.mu.Unlock()
	if ok || s.redis == nil || recent {
		return until, ok
	}
	ms, err := s.redis.Get(ctx, s.limitKey(team)).Int64()
	if err != nil || !now.Before(time.UnixMilli(ms)) {
		if err == nil || errors.Is(err, redis.Nil) {
			s.mu.Lock()
			if len(s.unlimited) >= maxTeamsRemembered {
				clear(s.unlimited) // asked again, not wrong
			}
			s.unlimited[team] = now
			s.mu.Unlock()
		}
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

// nameAuthors fills in the AuthorName of msgs that have none.
func (a *Adapter) nameAuthors(ctx context.Context, team string, msgs []channels.RoomMessage) {
	a.room.names.Name(ctx, team, msgs, a.opts.Now(), a.userName, a.log)
}

// userName asks users.info for a user's display name (else real name,
// else handle). A refusal other than a rate limit (an unknown user, a
// token without users:read) is channels.ErrUnnamed.
func (a *Adapter) userName(ctx context.Context, user string) (string, error) {
	u, err := a.api.GetUserInfoContext(ctx, user)
	if err != nil {
		a.countAPIError(err)
		var se slackapi.SlackErrorResponse
		if errors.As(err, &se) && se.Err != "ratelimited" {
			return "", errors.Join(channels.ErrUnnamed, err)
		}
		return "", err
	}
	return cutText(firstOf(u.Profile.DisplayName, u.RealName, u.Profile.RealName, u.Name), channels.MaxNameBytes), nil
}
