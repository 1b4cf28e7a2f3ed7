package slack

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
)

// Routes of the HTTP transport.
const (
	EventsPath   = "/slack/events"
	CommandsPath = "/slack/commands"
)

// submitTimeout bounds the hand-over to the gateway (it only queues), so
// Slack gets its answer well within its 3 s.
const submitTimeout = 2500 * time.Millisecond

// Mount implements channels.HTTPChannel: POST /slack/events, POST
// /slack/commands and POST /slack/interactions, when a signing secret is
// configured; for an account other than the default each route ends in
// /NAME, and verifies with that account's signing secret alone.
func (a *Adapter) Mount(mux *http.ServeMux) {
	if !a.cfg.SigningSecret.IsSet() {
		return
	}
	mux.HandleFunc("POST "+a.route(EventsPath), a.serveEvents)
	mux.HandleFunc("POST "+a.route(CommandsPath), a.serveCommands)
	mux.HandleFunc("POST "+a.route(InteractionsPath), a.serveInteractions) // interactions.go
}

// reject answers a refused request, counts it by reason and logs it (one
// line per reason every logthrottle.DefaultEvery: a flood of forgeries
// must not flood the log).
func (a *Adapter) reject(w http.ResponseWriter, r *http.Request, status int, reason string) {
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.refusals.Log(r.Context(), a.log, slog.LevelWarn, reason, Name, "request refused", "path", r.URL.Path, "reason", reason, "remote", r.RemoteAddr)
	http.Error(w, http.StatusText(status), status)
}

// verified reads and verifies a request body; on failure it has answered.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := channels.ReadBody(r, channels.MaxWebhookBody)
	if errors.Is(err, channels.ErrBodyTooLarge) {
		a.reject(w, r, http.StatusRequestEntityTooLarge, "too_large")
		return nil, false
	}
	if err != nil {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return nil, false
	}
	if err := Verify(r.Header, body, a.cfg.SigningSecret.Reveal(), a.opts.Now()); err != nil {
		a.reject(w, r, http.StatusUnauthorized, rejectReason(err))
		return nil, false
	}
	return body, true
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Type == "" {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	switch env.Type {
	case "url_verification":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(env.Challenge))
		return
	case "event_callback":
	case "app_rate_limited":
		a.log.Warn("Slack is rate-limiting this app's events")
		return
	default:
		return // acked, nothing to do
	}
	if retry := r.Header.Get("X-Slack-Retry-Num"); retry != "" {
		a.log.Debug("event retried", "event_id", env.EventID, "retry", retry, "reason", r.Header.Get("X-Slack-Retry-Reason"))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), submitTimeout)
	defer cancel()
	m, ok, why := a.message(env)
	if !ok {
		a.log.Debug("event ignored", "event_id", env.EventID, "why", why)
		return
	}
	h := a.httpHandler()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := a.submit(ctx, h, env.EventID, m); err != nil {
		// Slack retries a failed delivery; the retry finds the event again.
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *Adapter) serveCommands(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	c := slackapi.SlashCommand{
		TeamID: form.Get("team_id"), ChannelID: form.Get("channel_id"), ChannelName: form.Get("channel_name"),
		UserID: form.Get("user_id"), UserName: form.Get("user_name"), Command: form.Get("command"),
		Text: form.Get("text"), ResponseURL: form.Get("response_url"), TriggerID: form.Get("trigger_id"),
		APIAppID: form.Get("api_app_id"),
	}
	if c.Command == "" || c.UserID == "" || c.ChannelID == "" {
		a.reject(w, r, http.StatusBadRequest, "bad_request")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), submitTimeout)
	defer cancel()
	if text := a.command(ctx, c, a.httpHandler()); text != "" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"response_type": slackapi.ResponseTypeEphemeral, "text": text})
	}
}

// command submits a slash command; a non-empty result is an immediate
// ephemeral answer for the user.
func (a *Adapter) command(ctx context.Context, c slackapi.SlashCommand, h channels.Handler) string {
	if !a.isCommand(c) {
		a.m.MessagesRejected.WithLabelValues(Name, "unknown_command").Inc()
		a.log.Warn("unknown slash command", "command", c.Command, "configured", a.cfg.Command)
		return "Sorry, I only know " + a.cfg.Command + "."
	}
	if h == nil {
		return "Sorry, I'm still starting up. Please try again in a moment."
	}
	if err := h.Submit(ctx, a.commandMessage(c)); err != nil {
		a.log.Error("could not hand over a slash command", "err", err)
		return "Sorry, I could not take that just now. Please try again."
	}
	return ""
}

// submit hands an event's message to the gateway. A follow-up in a thread
// the bot does not take part in is dropped, not failed.
func (a *Adapter) submit(ctx context.Context, h channels.Handler, eventID string, m channels.Message) error {
	if m.Meta[metaMention] != "" {
		delete(m.Meta, metaMention)
		// A mention does not say whether it came from a group DM, which
		// the access rules treat as a direct message. Asking Slack puts a
		// Web API call on the webhook's path (once per channel), so it is
		// asked only when the rules in the mention's scope tell the two
		// apart.
		if a.opts.DMMatters == nil || a.opts.DMMatters(m) {
			dm, err := a.isGroupDM(ctx, m.Chat)
			if err != nil {
				a.log.Error("could not tell whether a mention came from a group DM; Slack will deliver it again", "event_id", eventID, "err", err)
				return err
			}
			m.DM = dm
		}
	}
	err := h.Submit(ctx, m)
	switch {
	case errors.Is(err, channels.ErrUnmarked):
		a.log.Debug("event ignored", "event_id", eventID, "why", "thread not followed")
		return nil
	case err != nil:
		a.log.Error("could not hand over an event", "event_id", eventID, "err", err)
	}
	return err
}
