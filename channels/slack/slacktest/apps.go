package slacktest

import (
	"fmt"
	"net/url"
)

// Several apps in the fake workspace: each Slack app a deployment runs
// (slack.accounts.NAME) has its own bot token, app token and bot user,
// and the fake answers each as the app its token belongs to. The package's
// own constants are the first app's.

// App is one Slack app installed in the fake workspace.
type App struct {
	BotToken, AppToken string
	BotUserID, BotID   string
}

// DefaultApp is the app of the package's constants.
var DefaultApp = App{BotToken: BotToken, AppToken: AppToken, BotUserID: BotUserID, BotID: BotID}

// paramBy carries, from api to the methods that make messages, the bot
// user of the app that called (no real parameter can hold a NUL).
const paramBy = "\x00by"

// AddApp installs another app: its tokens are accepted from now on, and
// what it posts is made by its bot user (By).
func (s *Server) AddApp(a App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps = append(s.apps, a)
}

// Revoke makes every call with the app's bot token (or app token) answer
// ok:false with token_revoked from now on, as Slack does once an app's
// token is revoked.
func (s *Server) Revoke(botToken string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked == nil {
		s.revoked = map[string]bool{}
	}
	s.revoked[botToken] = true
}

// appOf returns the app token belongs to, for method (an app token only
// opens Socket Mode, a bot token calls everything else), and whether its
// token is revoked.
func (s *Server) appOf(method, token string) (app App, ok, revoked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range append([]App{DefaultApp}, s.apps...) {
		want := a.BotToken
		if method == "apps.connections.open" {
			want = a.AppToken
		}
		if token == want {
			return a, true, s.revoked[a.BotToken]
		}
	}
	return App{}, false, false
}

// By lists the posts that the app whose bot user is bot made, in order
// (response_url posts are no app's).
func (s *Server) By(bot string) []Post {
	var out []Post
	for _, p := range s.Posts() {
		s.mu.Lock()
		by := s.madeBy[p.TS]
		s.mu.Unlock()
		if p.TS != "" && by == bot {
			out = append(out, p)
		}
	}
	return out
}

// made records which app's bot made the message ts; called under s.mu.
func (s *Server) made(ts string, params url.Values) {
	if s.madeBy == nil {
		s.madeBy = map[string]string{}
	}
	s.madeBy[ts] = params.Get(paramBy)
}

// EventTo is Event as Slack delivers it to app: authorized as its bot.
func EventTo(app App, eventID string, inner map[string]any) map[string]any {
	e := Event(eventID, inner)
	e["authorizations"] = []map[string]any{{"team_id": TeamID, "user_id": app.BotUserID, "is_bot": true}}
	return e
}

// MentionOf is an app_mention of app's bot; thread is "" for a top-level
// one.
func MentionOf(app App, channel, user, ts, thread, text string) map[string]any {
	e := Mention(channel, user, ts, thread, text)
	e["text"] = "<@" + app.BotUserID + "> " + text
	return e
}

// appsNow is a copy of the apps besides DefaultApp.
func (s *Server) appsNow() []App {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]App(nil), s.apps...)
}

// SendEventTo wraps an Events API payload in an events_api envelope and
// sends it on the newest Socket Mode connection of app, as Slack sends
// each app's events on that app's own connections.
func (s *Server) SendEventTo(app App, envelopeID string, payload any) error {
	c := s.latestOf(app)
	if c == nil {
		return fmt.Errorf("slacktest: no socket mode connection of app %s", app.BotUserID)
	}
	return c.write(map[string]any{"envelope_id": envelopeID, "type": "events_api", "payload": payload,
		"accepts_response_payload": false, "retry_attempt": 0, "retry_reason": ""})
}

// ConnectionsOf reports how many Socket Mode connections app opened.
func (s *Server) ConnectionsOf(app App) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.app == app.BotUserID {
			n++
		}
	}
	return n
}
