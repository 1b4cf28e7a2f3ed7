package slack

import (
	"encoding/json"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/parleyhq/parley/channels"
)

// Events in: what the Events API (over HTTP or Socket Mode) and slash
// commands deliver, made into channels.Message — which events are the
// bot's to answer, in which thread, with which marks.

// envelope is the outer Events API payload, over HTTP and inside a Socket
// Mode events_api envelope alike.
type envelope struct {
	Type           string                        `json:"type"`
	Challenge      string                        `json:"challenge"`
	TeamID         string                        `json:"team_id"`
	EventID        string                        `json:"event_id"`
	Event          json.RawMessage               `json:"event"`
	Authorizations []slackapi.EventAuthorization `json:"authorizations"`
}

// allowedSubtypes are message subtypes a person writes.
var allowedSubtypes = map[string]bool{"": true, "file_share": true, "thread_broadcast": true}

// message turns an event_callback into the message to submit; ok is false
// for events the bot does not answer. why says why, for debug logs.
func (a *Adapter) message(env envelope) (m channels.Message, ok bool, why string) {
	var e event
	if err := json.Unmarshal(env.Event, &e); err != nil {
		return m, false, "undecodable event"
	}
	bot := a.BotUserID()
	if bot == "" { // auth.test has not answered yet: the event says who we are
		for _, au := range env.Authorizations {
			if au.IsBot && au.UserID != "" {
				bot = au.UserID
				break
			}
		}
	}
	base := channels.Message{ID: env.EventID, Channel: Name, Account: a.opts.Account, Workspace: env.TeamID, Received: time.Now()}
	base.Attachments = eventFiles(e.Files)
	switch e.Type {
	case string(slackevents.AppMention):
		return a.appMention(e, bot, base)
	case string(slackevents.Message):
		return a.messageEvent(e, bot, base)
	}
	return m, false, "event type " + e.Type
}

// event is what Parley reads of an app_mention or message event, in one
// decode. slack-go's event types also decode the message's blocks (and
// its MessageEvent the whole event twice), which Parley never reads.
type event struct {
	Type            string    `json:"type"`
	SubType         string    `json:"subtype"`
	User            string    `json:"user"`
	BotID           string    `json:"bot_id"`
	Channel         string    `json:"channel"`
	ChannelType     string    `json:"channel_type"`
	Text            string    `json:"text"`
	TimeStamp       string    `json:"ts"`
	ThreadTimeStamp string    `json:"thread_ts"`
	Edited          *struct{} `json:"edited"`
	// Files is decoded only when present (eventFiles): a file it cannot
	// read leaves the message without attachments, not unanswered.
	Files json.RawMessage `json:"files"`
}

// appMention starts or continues the conversation of the mention's thread.
func (a *Adapter) appMention(e event, bot string, m channels.Message) (_ channels.Message, ok bool, why string) {
	switch {
	case e.BotID != "" || e.User == "":
		return m, false, "from a bot"
	case e.User == bot:
		return m, false, "own message"
	case e.Edited != nil:
		return m, false, "edited"
	case e.Channel == "":
		return m, false, "no channel"
	case isDMChannel(e.Channel):
		return m, false, "mention in a DM (the message.im event carries it)"
	}
	thread := e.ThreadTimeStamp
	if thread == "" {
		thread = e.TimeStamp
	}
	if a.cfg.FollowThreads {
		m.Marks = followed
	}
	m.Chat, m.Thread, m.User = e.Channel, thread, e.User
	m.Text = CleanText(e.Text, bot)
	if m.Text == "" && len(m.Attachments) == 0 {
		// A bare mention ("@parley" and nothing else) calls the bot
		// without a question: answer with the help, as an empty /parley
		// does, rather than with nothing.
		m.Text = "/help"
	}
	m.Meta = map[string]string{MetaTS: e.TimeStamp, MetaThreadTS: thread, metaMention: "1"}
	return m, true, ""
}

// metaMention marks, between message and submit, a mention whose channel
// kind (a group DM or not) submit must look up; it is removed before the
// message is handed over.
const metaMention = "mention"

// messageEvent takes a DM, or a follow-up in a thread the bot answered;
// channel messages that mention the bot come as app_mention instead.
func (a *Adapter) messageEvent(e event, bot string, m channels.Message) (_ channels.Message, ok bool, why string) {
	switch {
	case e.BotID != "" || e.User == "":
		return m, false, "from a bot"
	case !allowedSubtypes[e.SubType]:
		return m, false, "subtype " + e.SubType
	case e.User == bot:
		return m, false, "own message"
	case e.Channel == "":
		return m, false, "no channel"
	}
	m.Chat, m.User = e.Channel, e.User
	m.Text = CleanText(e.Text, bot)
	if e.ChannelType == slackevents.ChannelTypeIM || isDMChannel(e.Channel) {
		m.DM = true
		m.Thread = e.ThreadTimeStamp
		m.Meta = map[string]string{MetaTS: e.TimeStamp, MetaThreadTS: e.ThreadTimeStamp}
		return m, true, ""
	}
	switch {
	case e.ThreadTimeStamp == "" || e.ThreadTimeStamp == e.TimeStamp:
		return m, false, "not in a thread"
	case mentions(e.Text, bot):
		return m, false, "mentions the bot (the app_mention event carries it)"
	case a.addressesPeer(e.Text):
		return m, false, "addressed to another of the deployment's Slack apps"
	case !a.cfg.FollowThreads:
		return m, false, "thread following is off"
	}
	// Taken only if the bot takes part in the thread: the gateway checks
	// the mark when it accepts the message (channels.ErrUnmarked if not).
	m.RequireMark, m.Marks = MarkFollowed, followed
	// A group DM is threaded like a channel but is a direct message to
	// the access rules: access.dms governs it, not access.chats.
	m.DM = e.ChannelType == slackevents.ChannelTypeMPIM
	m.Thread = e.ThreadTimeStamp
	m.Meta = map[string]string{MetaTS: e.TimeStamp, MetaThreadTS: e.ThreadTimeStamp}
	return m, true, ""
}

// followed is the marks of a message the bot takes from a thread.
var followed = []string{MarkFollowed}

// isDMChannel reports a direct-message channel id.
func isDMChannel(id string) bool { return strings.HasPrefix(id, "D") }

// isDMName reports the channel_name Slack gives a slash command run in a
// direct message ("directmessage") or a group DM ("mpdm-ann--bob-1"),
// whose id does not tell it from a private channel.
func isDMName(name string) bool {
	return name == "directmessage" || strings.HasPrefix(name, "mpdm-")
}

// commandMessage turns a slash command into the message to submit. The
// text goes to the gateway as typed after the command: "/parley /skill
// list" runs the chat command, "/parley how do I…" asks the model, and an
// empty "/parley" shows the help.
func (a *Adapter) commandMessage(c slackapi.SlashCommand) channels.Message {
	text := CleanText(c.Text, a.BotUserID())
	if text == "" {
		text = "/help"
	}
	id := ""
	if c.TriggerID != "" {
		id = "cmd:" + c.TriggerID
	}
	return channels.Message{
		ID: id, Channel: Name, Account: a.opts.Account, Workspace: c.TeamID, Chat: c.ChannelID,
		Thread: "slash:" + c.UserID, User: c.UserID, UserName: c.UserName,
		Text: text, DM: isDMChannel(c.ChannelID) || isDMName(c.ChannelName), Received: time.Now(),
		Meta: map[string]string{MetaResponseURL: c.ResponseURL},
	}
}

// isCommand reports whether c is this app's slash command.
func (a *Adapter) isCommand(c slackapi.SlashCommand) bool {
	return strings.EqualFold(c.Command, a.cfg.Command)
}
