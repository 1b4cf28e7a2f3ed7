package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// Reading the room back (channels.RoomReader). A mention inside a thread
// reads the thread with conversations.replies, from the last ts the
// conversation saw (RoomQuery.Since, oldest=, exclusive) up to the
// mention (latest=, exclusive); a top-level mention reads the channel's
// last RoomQuery.Recent messages before it with conversations.history.
// Authors' names come from users.info, cached (names.go). Needs the
// channels:history, groups:history, im:history and mpim:history scopes
// for the four kinds of conversation, and users:read for names.
//
// Slack's limits: both methods are Tier 3 (about 50 calls a minute); a
// commercially distributed app outside the Marketplace gets, since 2025,
// about one call a minute and 15 messages a call. A read is never
// retried: a 429 ends it with what it has (ErrRoomRateLimited), and no
// read of that workspace is tried again before its Retry-After has
// passed, on any replica; the part not read is read by the next turn
// (the Cursor stops at the newest message read).

var _ channels.RoomReader = (*Adapter)(nil)

const (
	// roomPageLimit is the limit of one page (Slack advises 200 at most).
	roomPageLimit = 200
	// roomPages bounds the pages of one read: a 10,000-message thread is
	// not read whole.
	roomPages = 5
	// roomAnswerBytes bounds what is read of one page: 200 messages of
	// up to 40,000 characters each fit.
	roomAnswerBytes = 16 << 20
	// maxRoomText bounds the text kept of one message (Slack allows
	// 40,000 characters; the gateway's budget cuts further).
	maxRoomText = 64 << 10
)

// roomMessage is what Parley reads of a message of conversations.replies
// or conversations.history.
type roomMessage struct {
	TS          string          `json:"ts"`
	User        string          `json:"user"`
	BotID       string          `json:"bot_id"`
	Username    string          `json:"username"`
	SubType     string          `json:"subtype"`
	Text        string          `json:"text"`
	Files       json.RawMessage `json:"files"`
	UserProfile *struct {
		DisplayName string `json:"display_name"`
		RealName    string `json:"real_name"`
	} `json:"user_profile"`
	BotProfile *struct {
		Name string `json:"name"`
	} `json:"bot_profile"`
}

// roomAnswer is one page of either method.
type roomAnswer struct {
	slackapi.SlackResponse
	Messages         []roomMessage `json:"messages"`
	HasMore          bool          `json:"has_more"`
	ResponseMetadata struct {
		NextCursor string `json:"next_cursor"`
	} `json:"response_metadata"`
}

// roomSubtypes are the message subtypes that carry what someone wrote;
// joins, topic changes and the like are left out.
var roomSubtypes = map[string]bool{"": true, "file_share": true, "thread_broadcast": true, "bot_message": true, "me_message": true}

// ReadRoom implements channels.RoomReader.
func (a *Adapter) ReadRoom(ctx context.Context, q channels.RoomQuery) (channels.Room, error) {
	m := q.Message
	trigger, thread := m.Meta[MetaTS], m.Meta[MetaThreadTS]
	if m.Chat == "" || !isTS(trigger) || q.Max <= 0 {
		return channels.Room{}, nil // a slash command has no place in a channel
	}
	since := q.Since
	if !isTS(since) {
		since = ""
	}
	if lead := tsTime(since).Sub(tsTime(trigger)); since != "" && lead > 0 {
		if lead <= channels.CursorLead {
			return channels.Room{}, nil // read up to a later message already
		}
		since = ""
	}
	form := url.Values{"token": {a.cfg.BotToken.Reveal()}, "channel": {m.Chat}, "latest": {trigger}}
	if since != "" {
		form.Set("oldest", since)
	}
	var read roomRead
	var err error
	switch {
	case q.Thread && thread != "" && thread != trigger:
		form.Set("ts", thread)
		// Pages as large as Slack allows: the oldest come first, the
		// newest are wanted, and each call counts against the limit.
		read, err = a.readPages(ctx, m, "conversations.replies", form, q.Max, roomPageLimit)
	case q.Recent > 0 && (thread == "" || thread == trigger):
		n := min(q.Recent, q.Max)
		read, err = a.readPages(ctx, m, "conversations.history", form, n, n)
		slices.Reverse(read.msgs) // newest first as listed
	default:
		return channels.Room{}, nil
	}
	room := a.roomOf(ctx, m, read, q.Max)
	if err == nil && !read.partial {
		room.Cursor = trigger // everything up to the mention was read
	}
	return room, err
}

// roomRead is what the pages of one read gave.
type roomRead struct {
	msgs    []roomMessage
	partial bool // pages remain unread (a bound, a failure)
}

// readPages reads up to want messages of method (with form), page by
// page, at most roomPages; limit is the page size wanted.
func (a *Adapter) readPages(ctx context.Context, m channels.Message, method string, form url.Values, want, limit int) (roomRead, error) {
	var r roomRead
	if until, limited := a.room.limited(ctx, m.Workspace, a.opts.Now()); limited {
		r.partial = true
		return r, fmt.Errorf("slack: %s: %w (until %s)", method, channels.ErrRoomRateLimited, until.Format(time.RFC3339))
	}
	form.Set("limit", strconv.Itoa(min(limit, roomPageLimit)))
	for page := 0; ; page++ {
		if page == roomPages {
			r.partial = true
			return r, nil
		}
		var ans roomAnswer
		if err := a.roomCall(ctx, method, form, &ans); err != nil {
			r.partial = true
			return r, a.roomError(ctx, m, method, err)
		}
		for _, msg := range ans.Messages {
			if inRange(msg.TS, form.Get("oldest"), form.Get("latest")) && roomSubtypes[msg.SubType] {
				r.msgs = append(r.msgs, msg)
			}
		}
		next := ans.ResponseMetadata.NextCursor
		if method == "conversations.history" && len(r.msgs) >= want {
			r.msgs = r.msgs[:want] // the newest want, listed newest first
			return r, nil
		}
		if next == "" || next == form.Get("cursor") {
			return r, nil
		}
		form.Set("cursor", next)
	}
}

// roomCall calls a history method, as postForm does, reading a larger
// answer than a post's.
func (a *Adapter) roomCall(ctx context.Context, method string, form url.Values, ans *roomAnswer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.APIURL+method, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		after, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
		return &slackapi.RateLimitedError{RetryAfter: time.Duration(max(after, 1)) * time.Second}
	}
	if resp.StatusCode != http.StatusOK {
		return slackapi.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, roomAnswerBytes+1))
	if err != nil {
		return err
	}
	if len(body) > roomAnswerBytes {
		return fmt.Errorf("answer over %d bytes: %w", roomAnswerBytes, errUnreadAnswer)
	}
	if err := json.Unmarshal(body, ans); err != nil {
		return fmt.Errorf("decode the answer: %w: %w", errUnreadAnswer, err)
	}
	return ans.Err()
}

// deniedCodes are the ok:false errors of a read the app may not make.
var deniedCodes = map[string]bool{
	"missing_scope": true, "not_in_channel": true, "channel_not_found": true, "access_denied": true,
	"not_allowed_token_type": true, "no_permission": true, "ekm_access_denied": true,
}

// roomError classifies a failed read, remembering a rate limit's
// Retry-After for the workspace.
func (a *Adapter) roomError(ctx context.Context, m channels.Message, method string, err error) error {
	a.countAPIError(err)
	var rl *slackapi.RateLimitedError
	code := ""
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		code = se.Err
	}
	switch {
	case errors.As(err, &rl):
		a.room.limit(ctx, m.Workspace, a.opts.Now(), a.opts.Now().Add(rl.RetryAfter))
		return fmt.Errorf("slack: %s: %w (retry after %s)", method, channels.ErrRoomRateLimited, rl.RetryAfter)
	case code == "ratelimited" || code == "rate_limited":
		a.room.limit(ctx, m.Workspace, a.opts.Now(), a.opts.Now().Add(time.Minute))
		return fmt.Errorf("slack: %s: %w", method, channels.ErrRoomRateLimited)
	case deniedCodes[code]:
		return fmt.Errorf("slack: %s: %w: %s", method, channels.ErrRoomDenied, code)
	}
	return fmt.Errorf("slack: %s: %w", method, err)
}

// roomOf turns what was read into the Room: oldest first, the newest max
// kept, names filled in, the Cursor at the newest message read.
func (a *Adapter) roomOf(ctx context.Context, m channels.Message, r roomRead, max int) channels.Room {
	var room channels.Room
	bot, botID := a.BotUserID(), a.botIDOf()
	for _, msg := range r.msgs {
		rm := channels.RoomMessage{ID: msg.TS, Author: msg.User, Time: tsTime(msg.TS),
			Text: cutText(CleanText(msg.Text, bot), maxRoomText), Attachments: describeFiles(msg.Files),
			Bot: msg.User != "" && msg.User == bot || msg.BotID != "" && msg.BotID == botID}
		switch {
		case msg.User == "" && msg.BotID != "":
			rm.Author = msg.BotID
			if msg.BotProfile != nil && msg.BotProfile.Name != "" {
				rm.AuthorName = msg.BotProfile.Name
			} else {
				rm.AuthorName = msg.Username
			}
		case msg.UserProfile != nil:
			rm.AuthorName = firstOf(msg.UserProfile.DisplayName, msg.UserProfile.RealName)
		}
		rm.AuthorName = cutText(rm.AuthorName, channels.MaxNameBytes)
		if rm.Text == "" && len(rm.Attachments) == 0 {
			continue
		}
		room.Messages = append(room.Messages, rm)
	}
	if n := len(r.msgs); n > 0 {
		room.Cursor = r.msgs[n-1].TS
	}
	if over := len(room.Messages) - max; over > 0 {
		room.Omitted, room.Messages = over, room.Messages[over:]
	}
	a.nameAuthors(ctx, m.Workspace, room.Messages)
	return room
}

// firstOf is the first of its arguments that is not empty.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// botIDOf is the bot's bot_id from auth.test ("" until known).
func (a *Adapter) botIDOf() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// describeFiles describes a message's files, never fetching them.
func describeFiles(raw json.RawMessage) []string {
	var out []string
	for _, f := range eventFiles(raw) {
		out = append(out, channels.DescribeAttachment(f))
	}
	return out
}

// cutText cuts s to at most n bytes on a rune boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " […]"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// tsTime is the time of a Slack ts.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000).UTC()
}

// inRange reports whether ts is after oldest ("" for no bound) and
// before latest: conversations.replies lists a thread's parent first
// whatever oldest says, and the mention's own ts is never room.
func inRange(ts, oldest, latest string) bool {
	return (oldest == "" || tsAfter(ts, oldest)) && tsAfter(latest, ts)
}

// tsAfter reports whether ts a is later than b.
func tsAfter(a, b string) bool { return tsTime(a).After(tsTime(b)) }
