package wecomapp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
)

// Reasons a callback is refused besides wxcrypto's: the reason label of
// parley_messages_rejected_total.
const (
	ReasonTooLarge    = "too_large"
	ReasonUnavailable = "unavailable"
	ReasonWrongAgent  = "wrong_agent"
)

// unsupportedNote answers a message Parley cannot read.
const unsupportedNote = "Sorry, I can only read text, images (and voice messages WeCom transcribes) for now. Please send your question as text."

// Mount implements channels.HTTPChannel: GET (the URL check) and POST
// (messages) on /wecom/app/NAME for every app.
func (a *Adapter) Mount(mux *http.ServeMux) {
	for name, ap := range a.apps {
		mux.HandleFunc("GET "+PathPrefix+name, func(w http.ResponseWriter, r *http.Request) { a.verifyURL(w, r, ap) })
		mux.HandleFunc("POST "+PathPrefix+name, func(w http.ResponseWriter, r *http.Request) { a.callback(w, r, ap) })
	}
}

// refuse answers a failed check, the same way whatever failed, and counts
// it by reason.
func (a *Adapter) refuse(w http.ResponseWriter, r *http.Request, ap *app, err error) {
	reason := wxcrypto.Reason(err)
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.refusals.Log(r.Context(), ap.log, slog.LevelWarn, reason, ap.cfg.Name, "callback refused", "reason", reason, "err", err, "remote", r.RemoteAddr)
	wxcrypto.WriteRefusal(w)
}

// verifyURL answers the check WeCom makes when the callback URL is saved:
// the decrypted echostr.
func (a *Adapter) verifyURL(w http.ResponseWriter, r *http.Request, ap *app) {
	q, err := wxcrypto.ParseQuery(r.URL.Query())
	if err != nil {
		a.refuse(w, r, ap, err)
		return
	}
	plain, err := ap.crypter.OpenEcho(q, a.opts.Now(), a.opts.Window)
	if err != nil {
		a.refuse(w, r, ap, err)
		return
	}
	ap.log.Info("callback URL verified")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(plain)
}

// callback takes one message: verified and decrypted before it is read,
// handed to the gateway, acked with an empty passive reply.
func (a *Adapter) callback(w http.ResponseWriter, r *http.Request, ap *app) {
	body, err := wxcrypto.ReadBody(w, r, a.opts.BodyTimeout)
	if errors.Is(err, channels.ErrBodyTooLarge) {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonTooLarge).Inc()
		a.refusals.Log(r.Context(), ap.log, slog.LevelWarn, ReasonTooLarge, ap.cfg.Name, "callback refused", "reason", ReasonTooLarge, "remote", r.RemoteAddr)
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		a.refuse(w, r, ap, err)
		return
	}
	q, err := wxcrypto.ParseQuery(r.URL.Query())
	if err != nil {
		a.refuse(w, r, ap, err)
		return
	}
	msg, err := ap.crypter.OpenMessage(q, body, a.opts.Now(), a.opts.Window)
	if err == nil {
		if err = ap.replays.Check(r.Context(), q, body); err != nil && !errors.Is(err, wxcrypto.ErrRefused) {
			ap.log.Error("could not record the callback; WeCom will retry it", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
	}
	if err != nil {
		a.refuse(w, r, ap, err)
		return
	}
	if msg.AgentID != "" && msg.AgentID != strconv.FormatInt(ap.cfg.AgentID, 10) {
		// Authentic, but for another app sharing this callback's settings.
		a.m.MessagesRejected.WithLabelValues(Name, ReasonWrongAgent).Inc()
		ap.log.Warn("callback for another app (AgentID) ignored; give each app its own Token and EncodingAESKey", "agent_id", msg.AgentID)
		return
	}
	m, ok := a.message(ap, msg)
	if !ok {
		return // an event: acked
	}
	h := a.currentHandler()
	if h == nil {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonUnavailable).Inc()
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.opts.SubmitTimeout)
	defer cancel()
	if err := h.Submit(ctx, m); err != nil {
		// WeCom retries a callback that fails; the retry is de-duplicated
		// on the MsgId once one is accepted.
		ap.log.Error("could not hand over a message; WeCom will retry it", "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	// The empty passive reply: the answer follows through message/send.
	w.WriteHeader(http.StatusOK)
}

// message turns a callback message into the gateway's, or reports false
// for what the gateway does not take: events (entering the app, joining
// it), which are acked and ignored. A message without text is taken,
// with the note that answers it.
func (a *Adapter) message(ap *app, msg wxcrypto.Message) (channels.Message, bool) {
	var text string
	switch msg.MsgType {
	case "text":
		text = msg.Content
	case "voice":
		text = msg.Recognition // set when WeCom transcribed it
	case "event":
		ap.log.Debug("event ignored", "event", msg.Event)
		return channels.Message{}, false
	}
	text = strings.TrimSpace(text)
	if msg.MsgID == "" {
		a.m.MessagesRejected.WithLabelValues(Name, wxcrypto.ReasonBadRequest).Inc()
		ap.log.Warn("message without MsgId ignored", "type", msg.MsgType)
		return channels.Message{}, false
	}
	m := channels.Message{
		ID:        ap.cfg.Name + ":" + msg.MsgID,
		Channel:   Name,
		Workspace: ap.cfg.Name,
		Chat:      msg.FromUserName,
		User:      msg.FromUserName,
		Text:      text,
		DM:        true,
		Received:  a.opts.Now(),
		Meta:      map[string]string{MetaMsgID: msg.MsgID},
	}
	m.Attachments = wxapi.ImageAttachments(msg)
	if text == "" && len(m.Attachments) == 0 {
		// A video, a location, a link: the gateway answers with the note
		// if the access rules admit the member; a retried callback is a
		// duplicate there.
		m.Unsupported = unsupportedNote
	}
	return m, true
}

// MetaMsgID is the Message.Meta key of the WeCom MsgId.
const MetaMsgID = "msg_id"
