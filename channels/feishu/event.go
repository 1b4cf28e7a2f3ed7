package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/parleyhq/parley/channels"
)

var errNoHandler = errors.New("feishu: no handler yet")

// errMalformedEvent is an event that does not decode: pushing it again
// cannot help, so it is refused (400), not failed (500).
var errMalformedEvent = errors.New("feishu: malformed event")

// Meta keys a Message carries for its reply.
const (
	MetaMessageID = "message_id"   // the user's message: replied to, reacted on
	MetaChatType  = "chat_type"    // p2p, group or topic_group
	MetaEventID   = "event_id"     // for logs
	MetaThreadKey = "thread_key"   // chat:thread, refreshed when answered
	MetaInThread  = "reply_thread" // "1": reply with reply_in_thread
	// MetaThreadID is the message's thread (omt_…) when it is in one,
	// and MetaCreateTime its create_time (ms): where ReadRoom reads.
	MetaThreadID   = "thread_id"
	MetaCreateTime = "create_time"
)

// UnsupportedNote is the one answer to a message that is not text, post,
// image or file (a sticker, audio, a video…).
const UnsupportedNote = "Sorry, I can only read text, images and files for now."

// EventMessageReceive is the one event type the channel handles.
const EventMessageReceive = "im.message.receive_v1"

// Dispatch hands one plaintext event (the JSON a long-connection frame
// carries, or a verified and decrypted HTTP callback) to the dispatch both
// transports share. It returns once the message is queued (or dropped);
// unknown event types are ignored.
func (a *Adapter) Dispatch(ctx context.Context, event []byte) error { return a.dispatch(ctx, event) }

// dispatch reads the event's type and decodes im.message.receive_v1 into
// the SDK's type, as the SDK's event dispatcher does (same envelope, same
// struct). That dispatcher is not used: it imports two dozen of the SDK's
// API packages (12 MB of Go) for event types the channel never receives;
// the one other type it handled by default, app_ticket, is sent only to
// marketplace apps, and this channel is a self-built app.
func (a *Adapter) dispatch(ctx context.Context, event []byte) error {
	if a.currentHandler() == nil {
		return errNoHandler
	}
	var fuzzy larkevent.EventFuzzy
	if err := json.Unmarshal(event, &fuzzy); err != nil {
		return fmt.Errorf("%w: %v", errMalformedEvent, err)
	}
	if fuzzy.Encrypt != "" {
		return errors.New("event data is encrypted, Need to set up the `EncryptKey` for your APP")
	}
	var eventType string
	if fuzzy.Event != nil {
		eventType, _ = fuzzy.Event.Type.(string)
	}
	if fuzzy.Header != nil {
		eventType = fuzzy.Header.EventType
	}
	if eventType != EventMessageReceive {
		return nil
	}
	ev := &larkim.P2MessageReceiveV1{}
	if err := json.Unmarshal(event, ev); err != nil {
		return fmt.Errorf("%w: %v", errMalformedEvent, err)
	}
	ev.RawReq(&larkevent.EventReq{Body: event})
	return a.onMessageReceive(ctx, ev)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// onMessageReceive turns im.message.receive_v1 into a channels.Message and
// decides whether it starts or continues a turn.
func (a *Adapter) onMessageReceive(ctx context.Context, ev *larkim.P2MessageReceiveV1) error {
	m, ok := a.newMessage(ev)
	if !ok {
		return nil
	}
	msg := ev.Event.Message
	log := a.log.With("message_id", m.ID, "event_id", m.Meta[MetaEventID])
	rootID, threadID := deref(msg.RootId), deref(msg.ThreadId)
	mentions := mentionList(msg.Mentions)
	botID := a.cachedBotID()
	if !m.DM {
		a.setThread(&m, rootID, threadID)
		var err error
		if botID, err = a.botOpenID(ctx, a.calls); err != nil {
			// Without our own id a mention cannot be told apart; fail so
			// Feishu pushes the event again later.
			return fmt.Errorf("feishu: bot open_id unknown: %w", err)
		}
		admitted, err := a.admitGroupMessage(ctx, log, m, mentioned(mentions, botID), rootID != "" || threadID != "")
		if err != nil || !admitted {
			return err
		}
	}
	if !readContent(log, &m, msg, mentions, botID) {
		return nil
	}
	h := a.currentHandler()
	if h == nil {
		return errNoHandler
	}
	// The gateway de-duplicates on message_id (SET NX in Redis, shared by
	// every replica): a re-push, or the same event on another connection,
	// is dropped there.
	return h.Submit(ctx, m)
}

// newMessage reads who sent ev, where and in which tenant. It reports
// false for what cannot be answered: apps and bots (this one too), and a
// message without an id, a chat or a sender's id, to which the access
// rules cannot be applied.
func (a *Adapter) newMessage(ev *larkim.P2MessageReceiveV1) (channels.Message, bool) {
	if ev == nil || ev.Event == nil || ev.Event.Message == nil {
		return channels.Message{}, false
	}
	msg := ev.Event.Message
	sender := ev.Event.Sender
	if sender == nil || deref(sender.SenderType) != "user" {
		return channels.Message{}, false
	}
	openID := ""
	if sender.SenderId != nil {
		openID = deref(sender.SenderId.OpenId)
	}
	messageID := deref(msg.MessageId)
	chatID := deref(msg.ChatId)
	chatType := deref(msg.ChatType)
	if messageID == "" || chatID == "" || openID == "" {
		return channels.Message{}, false
	}
	var tenant, eventID string
	if ev.EventV2Base != nil && ev.EventV2Base.Header != nil {
		tenant, eventID = ev.EventV2Base.Header.TenantKey, ev.EventV2Base.Header.EventID
	}
	if tenant == "" {
		tenant = deref(sender.TenantKey)
	}
	m := channels.Message{
		ID:        messageID,
		Channel:   Name,
		Account:   a.opts.Account,
		Workspace: tenant,
		Chat:      chatID,
		User:      openID,
		DM:        chatType == "p2p",
		Received:  time.Now(),
		Meta:      map[string]string{MetaMessageID: messageID, MetaChatType: chatType},
	}
	if eventID != "" {
		m.Meta[MetaEventID] = eventID
	}
	if t := deref(msg.ThreadId); t != "" {
		m.Meta[MetaThreadID] = t
	}
	if t := deref(msg.CreateTime); t != "" {
		m.Meta[MetaCreateTime] = t
	}
	return m, true
}

// setThread sets a group message's conversation: the thread (or reply
// chain, or topic of a topic group) the message belongs to, named by its
// root message, or the thread the reply to this mention will open. The
// root's id names it in every kind of group, as it names the thread a
// trigger's root post starts (Address): a topic's omt_ id, which a post's
// answer does not give, stays in MetaThreadID for reading the room.
func (a *Adapter) setThread(m *channels.Message, rootID, threadID string) {
	chatType := m.Meta[MetaChatType]
	switch {
	case rootID != "":
		m.Thread = rootID
	case chatType == "topic_group":
		m.Thread = m.ID // a topic's first message is its root
	case threadID != "":
		m.Thread = threadID
	default:
		m.Thread = m.ID
	}
	m.Meta[MetaThreadKey] = m.Chat + ":" + m.Thread
	if a.cfg.ReplyInThread || chatType == "topic_group" {
		m.Meta[MetaInThread] = "1"
	}
}

// mentioned reports whether mentions name the bot.
func mentioned(mentions []mention, botID string) bool {
	for _, mn := range mentions {
		if mn.openID == botID {
			return true
		}
	}
	return false
}

// admitGroupMessage decides whether a group message is for the bot: one
// that mentions it (whose thread it then follows, with follow_threads), or
// one in a thread it follows.
func (a *Adapter) admitGroupMessage(ctx context.Context, log *slog.Logger, m channels.Message, mentioned, inThread bool) (bool, error) {
	switch {
	case mentioned:
		if a.cfg.FollowThreads {
			if err := a.state.markThread(ctx, m.Meta[MetaThreadKey], a.opts.ThreadTTL); err != nil {
				log.Warn("cannot remember the thread; follow-ups will need a mention", "err", err)
			}
		}
		return true, nil
	case a.cfg.FollowThreads && inThread:
		ok, err := a.state.followed(ctx, m.Meta[MetaThreadKey])
		if err != nil {
			return false, fmt.Errorf("feishu: thread lookup: %w", err)
		}
		if !ok {
			log.Debug("group message without a mention, outside an answered thread: ignored")
		}
		return ok, nil
	default:
		log.Debug("group message without a mention: ignored")
		return false, nil
	}
}

// readContent sets m's text and attachments from msg, or the note for a
// type the channel cannot read. It reports false for a message left empty
// once the mention is removed.
func readContent(log *slog.Logger, m *channels.Message, msg *larkim.EventMessage, mentions []mention, botID string) bool {
	text, ok := messageText(deref(msg.MessageType), deref(msg.Content), mentions, botID)
	m.Attachments = messageAttachments(deref(msg.MessageType), deref(msg.Content), m.ID)
	switch {
	case len(m.Attachments) > 0:
		// Images and files: fetched by the gateway during the turn.
	case !ok:
		// Handed over like any message: the gateway answers it with the
		// note, and only if the access rules admit the sender. A re-push
		// is a duplicate there, so the note goes out once.
		log.Debug("unsupported message type: handed over for a note", "type", deref(msg.MessageType))
		m.Unsupported = UnsupportedNote
	case text == "":
		log.Debug("empty message after removing the mention: ignored")
		return false
	}
	m.Text = text
	return true
}

type mention struct {
	key, openID, name string
}

func mentionList(ms []*larkim.MentionEvent) []mention {
	var out []mention
	for _, mn := range ms {
		if mn == nil {
			continue
		}
		x := mention{key: deref(mn.Key), name: deref(mn.Name)}
		if mn.Id != nil {
			x.openID = deref(mn.Id.OpenId)
		}
		out = append(out, x)
	}
	return out
}

// messageText extracts the text of a text or post message: placeholders
// become @names, the bot's own mention is removed. ok is false for other
// types.
func messageText(msgType, content string, mentions []mention, botID string) (string, bool) {
	var text string
	switch msgType {
	case "text":
		var t struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(content), &t); err != nil {
			return "", false
		}
		text = t.Text
	case "post":
		var ok bool
		text, ok = flattenPost(content)
		if !ok {
			return "", false
		}
	default:
		return "", false
	}
	return resolveMentions(text, mentions, botID), true
}

// resolveMentions replaces @_user_N placeholders by @Name and drops the
// bot's own mention. Longer keys go first so @_user_1 never eats @_user_10.
func resolveMentions(text string, mentions []mention, botID string) string {
	sorted := append([]mention(nil), mentions...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && len(sorted[j].key) > len(sorted[j-1].key); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	for _, mn := range sorted {
		if mn.key == "" {
			continue
		}
		if botID != "" && mn.openID == botID {
			// Drop the mention with one adjoining space.
			text = strings.ReplaceAll(text, mn.key+" ", "")
			text = strings.ReplaceAll(text, " "+mn.key, "")
			text = strings.ReplaceAll(text, mn.key, "")
			continue
		}
		name := mn.name
		if name == "" {
			name = "user"
		}
		text = strings.ReplaceAll(text, mn.key, "@"+name)
	}
	return strings.TrimSpace(text)
}

// postElement is one inline element of a post paragraph.
type postElement struct {
	Tag      string `json:"tag"`
	Text     string `json:"text"`
	Href     string `json:"href"`
	UserID   string `json:"user_id"`
	UserName string `json:"user_name"`
	Language string `json:"language"`
	Emoji    string `json:"emoji_type"`
}

type postBody struct {
	Title   string          `json:"title"`
	Content [][]postElement `json:"content"`
}

// flattenPost turns rich text into plain text with light Markdown: one
// line per paragraph, links as [text](href), code blocks fenced, images
// and media as placeholders. A received post is {"title","content"};
// a locale-wrapped post ({"zh_cn":{…}}) is read too.
func flattenPost(content string) (string, bool) {
	var p postBody
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return "", false
	}
	if p.Title == "" && p.Content == nil {
		var byLocale map[string]json.RawMessage
		if err := json.Unmarshal([]byte(content), &byLocale); err != nil {
			return "", false
		}
		for _, loc := range []string{"zh_cn", "en_us", "ja_jp"} {
			if raw, ok := byLocale[loc]; ok {
				_ = json.Unmarshal(raw, &p)
				break
			}
		}
		if p.Content == nil {
			for _, raw := range byLocale {
				_ = json.Unmarshal(raw, &p)
				break
			}
		}
	}
	var lines []string
	if t := strings.TrimSpace(p.Title); t != "" {
		lines = append(lines, t)
	}
	for _, para := range p.Content {
		var b strings.Builder
		for _, el := range para {
			switch el.Tag {
			case "text", "md":
				b.WriteString(el.Text)
			case "a":
				if el.Href != "" && el.Text != "" && el.Text != el.Href {
					fmt.Fprintf(&b, "[%s](%s)", el.Text, el.Href)
				} else if el.Href != "" {
					b.WriteString(el.Href)
				} else {
					b.WriteString(el.Text)
				}
			case "at":
				// Received posts carry the placeholder key (resolved later
				// like a text message's); fall back to the name.
				switch {
				case strings.HasPrefix(el.UserID, "@_user_"):
					b.WriteString(el.UserID)
				case el.UserID == "all":
					b.WriteString("@all")
				case el.UserName != "":
					b.WriteString("@" + el.UserName)
				}
			case "img":
				b.WriteString("[image]")
			case "media":
				b.WriteString("[video]")
			case "emotion":
				if el.Emoji != "" {
					b.WriteString(":" + el.Emoji + ":")
				}
			case "hr":
				b.WriteString("---")
			case "code_block":
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString("```" + strings.ToLower(el.Language) + "\n" + strings.TrimRight(el.Text, "\n") + "\n```")
			default:
				b.WriteString(el.Text)
			}
		}
		lines = append(lines, b.String())
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), true
}
