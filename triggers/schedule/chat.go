package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/triggers"
	"github.com/redis/go-redis/v9"
)

// ChatSchedule is a schedule a chat administrator added with /schedule:
// an agent turn in that chat.
type ChatSchedule struct {
	ID   string `json:"id"`
	Cron string `json:"cron"`
	// Timezone is the IANA zone Cron is read in, from a CRON_TZ= prefix
	// of what the administrator wrote; empty is UTC.
	Timezone string               `json:"timezone,omitempty"`
	To       triggers.Destination `json:"to"`
	Prompt   string               `json:"prompt"`
	By       string               `json:"by"`
}

// Chats keeps the schedules added in chats, in Redis: one hash of them
// all (every replica's scheduler reads it) and a set of IDs per chat, the
// two under one hash tag so that an add is one script.
type Chats struct {
	client redis.UniversalClient
	prefix string
	conf   *Config
	clock  Clock
}

// NewChats returns the chat schedules under prefix, bounded by conf
// (max_per_chat, min_interval), whose file schedules /schedule list shows
// read-only. clock nil is the wall clock.
func NewChats(client redis.UniversalClient, prefix string, conf *Config, clock Clock) *Chats {
	if clock == nil {
		clock = RealClock{}
	}
	return &Chats{client: client, prefix: prefix, conf: conf, clock: clock}
}

func (c *Chats) allKey() string { return c.prefix + "{schedules}:chat" }

func (c *Chats) chatKey(to triggers.Destination) string {
	return c.prefix + "{schedules}:chat:" + to.Platform + ":" + to.Workspace + ":" + to.Chat
}

// destination is where m's chat schedules post: the chat, a new thread
// per fire.
func destination(m channels.Message) triggers.Destination {
	return triggers.Destination{Platform: m.Channel, Workspace: m.Workspace, Chat: m.Chat}
}

// addScript: KEYS[1] every chat schedule, KEYS[2] the chat's IDs; ARGV
// the ID, its JSON, the chat's bound.
var addScript = redis.NewScript(`
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
`)

// Add keeps a schedule of m's chat firing prompt at spec. refusal, when
// not empty, says to the administrator why it was not kept (a bad
// expression, too often, too many); err is a failure of Redis.
func (c *Chats) Add(ctx context.Context, m channels.Message, spec, prompt string) (id, refusal string, err error) {
	zone, spec := CutZone(spec)
	sched, perr := Parse(spec, zone)
	switch {
	case perr != nil:
		return "", fmt.Sprintf("That schedule can't be read (%v). Use five fields, as in `\"0 9 * * 1-5\"`, or `@daily`, in UTC or after a zone, as in `\"CRON_TZ=Europe/Berlin 0 9 * * 1-5\"`.", perr), nil
	case strings.TrimSpace(prompt) == "":
		return "", "Say what to do at those times: `/schedule add \"0 9 * * 1-5\" post the open incidents`.", nil
	case len(prompt) > 2000:
		return "", "That prompt is too long (at most 2000 characters).", nil
	}
	if gap := shortestGap(sched, c.clock.Now()); gap < c.conf.MinInterval {
		return "", fmt.Sprintf("That fires every %s; schedules here may fire at most every %s.", gap, c.conf.MinInterval), nil
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := ChatSchedule{ID: hex.EncodeToString(b[:]), Cron: spec, Timezone: zone, To: destination(m), Prompt: prompt, By: m.User}
	data, err := json.Marshal(s)
	if err != nil {
		return "", "", fmt.Errorf("schedule: encode: %w", err)
	}
	ok, err := addScript.Run(ctx, c.client, []string{c.allKey(), c.chatKey(s.To)}, s.ID, data, c.conf.MaxPerChat).Int()
	if err != nil {
		return "", "", fmt.Errorf("schedule: add: %w", err)
	}
	if ok == 0 {
		return "", fmt.Sprintf("This chat has %d schedules already, the most it may have. `/schedule remove ID` one first.", c.conf.MaxPerChat), nil
	}
	return s.ID, "", nil
}

// shortestGap is the shortest time between two of sched's next 100 fires.
func shortestGap(sched interface{ Next(time.Time) time.Time }, from time.Time) time.Duration {
	gap := time.Duration(1<<63 - 1)
	prev := sched.Next(from)
	for range 100 {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		gap = min(gap, next.Sub(prev))
		prev = next
	}
	return gap
}

// List is the text of /schedule list in m's chat: the file's schedules of
// the chat (read-only), then the chat's own.
func (c *Chats) List(ctx context.Context, m channels.Message) (string, error) {
	to := destination(m)
	var lines []string
	for _, name := range sortedNames(c.conf.Schedules) {
		s := c.conf.Schedules[name]
		if s.To.Platform == to.Platform && s.To.Workspace == to.Workspace && s.To.Chat == to.Chat {
			lines = append(lines, fmt.Sprintf("- `%s` `%s` (%s, %s, from the configuration: read-only here)", name, s.Cron, zoneName(s.Timezone), s.Answer))
		}
	}
	own, err := c.ofChat(ctx, to)
	if err != nil {
		return "", err
	}
	for _, s := range own {
		lines = append(lines, fmt.Sprintf("- `%s` `%s` (%s) %s", s.ID, s.Cron, zoneName(s.Timezone), quoteLine(s.Prompt)))
	}
	if len(lines) == 0 {
		return "No schedules in this chat. `/schedule add \"CRON\" PROMPT` adds one.", nil
	}
	return "Schedules of this chat:\n" + strings.Join(lines, "\n"), nil
}

// CutZone splits the zone off a chat's cron expression: the schedule
// "CRON_TZ=Europe/Berlin 0 9 * * *" (robfig/cron's way to name one) is
// "0 9 * * *" read in Europe/Berlin. Without the prefix zone is "", UTC.
// (In the file a schedule names its zone with timezone: instead.)
func CutZone(spec string) (zone, rest string) {
	spec = strings.TrimSpace(spec)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if after, ok := strings.CutPrefix(spec, prefix); ok {
			zone, rest, _ = strings.Cut(after, " ")
			return zone, strings.TrimSpace(rest)
		}
	}
	return "", spec
}

// zoneName is how a schedule's zone is shown.
func zoneName(zone string) string {
	if zone == "" {
		return "UTC"
	}
	return zone
}

// quoteLine shows a prompt on one line, cut.
func quoteLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return "— " + s
}

func sortedNames(m map[string]*Schedule) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v != nil {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ofChat returns the schedules of one chat, by ID.
func (c *Chats) ofChat(ctx context.Context, to triggers.Destination) ([]ChatSchedule, error) {
	ids, err := c.client.SMembers(ctx, c.chatKey(to)).Result()
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := c.client.HMGet(ctx, c.allKey(), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	var out []ChatSchedule
	for _, v := range vals {
		if str, ok := v.(string); ok {
			var s ChatSchedule
			if json.Unmarshal([]byte(str), &s) == nil {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// removeScript: KEYS[1] every chat schedule, KEYS[2] the chat's IDs;
// ARGV the ID. Only an ID of this chat is removed.
var removeScript = redis.NewScript(`
if redis.call('SREM', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`)

// Remove drops the schedule id of m's chat; refusal says why not (a file
// schedule, an ID that is not this chat's).
func (c *Chats) Remove(ctx context.Context, m channels.Message, id string) (refusal string, err error) {
	if _, ok := c.conf.Schedules[id]; ok {
		return fmt.Sprintf("`%s` is in the configuration; it can't be changed from a chat.", id), nil
	}
	n, err := removeScript.Run(ctx, c.client, []string{c.allKey(), c.chatKey(destination(m))}, id).Int()
	if err != nil {
		return "", fmt.Errorf("schedule: remove: %w", err)
	}
	if n == 0 {
		return fmt.Sprintf("This chat has no schedule `%s`. `/schedule list` shows them.", id), nil
	}
	// Its cursor has no expiry of its own; its claims and last result
	// expire with their retention.
	return "", NewClaims(c.client, c.prefix).Forget(ctx, chatEntryName(id))
}

// Entries implements Source: every chat schedule, as an agent turn in its
// chat. One that no longer parses is left out.
func (c *Chats) Entries(ctx context.Context) ([]Entry, error) {
	all, err := c.client.HGetAll(ctx, c.allKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("schedule: chat schedules: %w", err)
	}
	out := make([]Entry, 0, len(all))
	for _, v := range all {
		var s ChatSchedule
		if json.Unmarshal([]byte(v), &s) != nil {
			continue
		}
		sched, err := Parse(s.Cron, s.Timezone)
		if err != nil {
			continue
		}
		spec := s.Cron
		if s.Timezone != "" {
			spec = "CRON_TZ=" + s.Timezone + " " + s.Cron
		}
		out = append(out, Entry{Name: chatEntryName(s.ID), Label: ChatLabel, Spec: spec, Schedule: sched, Missed: MissedSkip,
			Work: triggers.Work{To: s.To, Answer: triggers.AnswerAgent, Prompt: s.Prompt}})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// chatEntryName is the scheduler's name of the chat schedule id.
func chatEntryName(id string) string { return "chat-" + id }
