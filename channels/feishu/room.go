package feishu

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/parleyhq/parley/channels"
)

// Reading the room back (channels.RoomReader), through GET
// /open-apis/im/v1/messages, newest first:
//
//   - a mention in a topic or a reply thread reads the thread
//     (container_id_type=thread), back from the mention to the last
//     message the conversation saw (RoomQuery.Since, a create_time in
//     ms) or Max messages;
//   - a top-level mention in a group, or a direct message, reads the
//     chat (container_id_type=chat, end_time the mention, start_time the
//     last read) back to the bot's own last answer there, at most
//     RoomQuery.Recent messages.
//
// Reading needs the im:message:readonly permission (the group's messages
// other than those that mention the bot also need im:message.group_msg);
// the bot must be in the chat. Without them Feishu answers a permission
// code and the read ends with ErrRoomDenied: the turn is answered without
// the room. The list allows about 1000 calls a minute (50 a second) per
// app; a rate limit (99991400) ends the read with ErrRoomRateLimited, and
// no read is retried.

var _ channels.RoomReader = (*Adapter)(nil)

const (
	// roomPageSize is the most the list gives a page.
	roomPageSize = 50
	// roomPages bounds the pages of one read.
	roomPages = 5
	// maxRoomText bounds the text kept of one message.
	maxRoomText = 64 << 10
)

// listedMessage is an item of the message list.
type listedMessage struct {
	MessageID  string `json:"message_id"`
	ThreadID   string `json:"thread_id"`
	MsgType    string `json:"msg_type"`
	CreateTime string `json:"create_time"`
	Deleted    bool   `json:"deleted"`
	Sender     struct {
		ID         string `json:"id"`
		SenderType string `json:"sender_type"`
	} `json:"sender"`
	Body struct {
		Content string `json:"content"`
	} `json:"body"`
	Mentions []struct {
		Key  string `json:"key"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"mentions"`
}

type listAnswer struct {
	Data struct {
		HasMore   bool            `json:"has_more"`
		PageToken string          `json:"page_token"`
		Items     []listedMessage `json:"items"`
	} `json:"data"`
}

// roomCodes classify a failed read.
var (
	rateCodes   = map[int]bool{99991400: true, 230020: true}
	deniedCodes = map[int]bool{
		230027:   true,                 // no permission for the operation
		230002:   true,                 // the bot is not in the chat
		230006:   true,                 // the bot's ability is off
		99991672: true, 99991679: true, // the app lacks the scope
		230073: true, // the chat's history is hidden from new members
	}
)

// ReadRoom implements channels.RoomReader.
func (a *Adapter) ReadRoom(ctx context.Context, q channels.RoomQuery) (channels.Room, error) {
	m := q.Message
	if m.Chat == "" || q.Max <= 0 {
		return channels.Room{}, nil
	}
	trigger := m.Meta[MetaMessageID]
	if trigger == "" {
		trigger = m.ID
	}
	at, err := strconv.ParseInt(m.Meta[MetaCreateTime], 10, 64)
	if err != nil || at <= 0 {
		at = a.opts.Now().UnixMilli()
	}
	since, _ := strconv.ParseInt(q.Since, 10, 64)
	if since < 0 {
		since = 0
	}
	if lead := time.Duration(since-at) * time.Millisecond; lead > 0 {
		if lead <= channels.CursorLead {
			return channels.Room{}, nil // read up to a later message already
		}
		since = 0
	}
	query := map[string]string{"sort_type": "ByCreateTimeDesc"}
	r := roomRead{trigger: trigger, at: at, since: since}
	switch thread := m.Meta[MetaThreadID]; {
	case q.Thread && thread != "":
		query["container_id_type"], query["container_id"] = "thread", thread
		r.want = q.Max
	case q.Recent > 0 && thread == "":
		query["container_id_type"], query["container_id"] = "chat", m.Chat
		query["end_time"] = strconv.FormatInt(at/1000, 10)
		if since > 0 {
			query["start_time"] = strconv.FormatInt(since/1000, 10)
		}
		r.want, r.untilBot = min(q.Recent, q.Max), true
	default:
		return channels.Room{}, nil
	}
	query["page_size"] = strconv.Itoa(min(r.want, roomPageSize))
	err = a.readPages(ctx, query, &r)
	return a.roomOf(ctx, m, r, err == nil && !r.partial), err
}

// roomRead is one read: its bounds and what it took so far, newest first.
type roomRead struct {
	trigger   string
	at, since int64 // ms: the mention's time, the last read's
	want      int
	untilBot  bool // stop at the bot's own last answer
	msgs      []listedMessage
	partial   bool // more remained than was read
	done      bool
}

// readPages reads pages until r has what it wants, at most roomPages.
func (a *Adapter) readPages(ctx context.Context, query map[string]string, r *roomRead) error {
	for page := 0; !r.done; page++ {
		if page == roomPages {
			r.partial = true
			return nil
		}
		var ans listAnswer
		err := a.callN(ctx, 1, "list_messages", http.MethodGet, "/open-apis/im/v1/messages", nil, query, nil, &ans)
		if err != nil {
			r.partial = true
			return roomError(err)
		}
		for _, msg := range ans.Data.Items {
			r.take(msg, a.cfg.AppID)
		}
		if !ans.Data.HasMore || ans.Data.PageToken == "" || ans.Data.PageToken == query["page_token"] {
			return nil
		}
		query["page_token"] = ans.Data.PageToken
	}
	return nil
}

// take adds msg, newest first, unless it is outside the read's bounds;
// it ends the read at the last read's time, the bot's last answer, or
// when the read has what it wants.
func (r *roomRead) take(msg listedMessage, appID string) {
	if r.done {
		return
	}
	t, _ := strconv.ParseInt(msg.CreateTime, 10, 64)
	switch {
	case msg.MessageID == r.trigger || t > r.at:
		return // the mention, or what came after it (the next read's)
	case r.since > 0 && t <= r.since:
		r.done = true
		return
	case r.untilBot && isOwn(msg, appID):
		r.done = true
		return
	case msg.Deleted:
		return
	}
	r.msgs = append(r.msgs, msg)
	r.done = len(r.msgs) >= r.want
}

func isOwn(msg listedMessage, appID string) bool {
	return msg.Sender.SenderType == "app" && msg.Sender.ID == appID
}

// roomError classifies a failed read.
func roomError(err error) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		switch {
		case rateCodes[apiErr.Code] || apiErr.Status == http.StatusTooManyRequests:
			return fmt.Errorf("%w: %w", channels.ErrRoomRateLimited, err)
		case deniedCodes[apiErr.Code]:
			return fmt.Errorf("%w: %w", channels.ErrRoomDenied, err)
		}
	}
	return err
}

// roomOf turns what was read into the Room, oldest first, senders named.
// complete says everything up to the mention was read.
func (a *Adapter) roomOf(ctx context.Context, m channels.Message, r roomRead, complete bool) channels.Room {
	var room channels.Room
	known := map[string]string{}
	botID := a.cachedBotID()
	for _, msg := range slices.Backward(r.msgs) {
		var mentions []mention
		for _, mn := range msg.Mentions {
			mentions = append(mentions, mention{key: mn.Key, openID: mn.ID, name: mn.Name})
			if mn.Name != "" && isOpenID(mn.ID) {
				known[mn.ID] = cut(mn.Name, channels.MaxNameBytes)
			}
		}
		rm := channels.RoomMessage{ID: msg.MessageID, Author: msg.Sender.ID, Time: msTime(msg.CreateTime),
			Bot: isOwn(msg, a.cfg.AppID)}
		text, ok := messageText(msg.MsgType, msg.Body.Content, mentions, botID)
		for _, att := range messageAttachments(msg.MsgType, msg.Body.Content, msg.MessageID) {
			rm.Attachments = append(rm.Attachments, channels.DescribeAttachment(att))
		}
		if !ok && len(rm.Attachments) == 0 {
			text = "[a " + cut(msg.MsgType, 32) + " message]"
		}
		rm.Text = cut(text, maxRoomText)
		if rm.Text == "" && len(rm.Attachments) == 0 {
			continue
		}
		room.Messages = append(room.Messages, rm)
	}
	a.nameSenders(ctx, m.Workspace, room.Messages, known)
	if complete || len(r.msgs) > 0 {
		// Read newest first: a read cut short still reached the mention,
		// and reading its older part again next time would show the
		// model what it has seen; that part is left out instead.
		room.Cursor = strconv.FormatInt(r.at, 10)
	}
	return room
}

// msTime is a create_time (ms) as a time.
func msTime(ms string) time.Time {
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// cut cuts s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + " […]"
}
