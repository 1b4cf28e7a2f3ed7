package feishutest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// Several apps in the fake tenant: each Feishu app a deployment runs
// (feishu.accounts.NAME) signs in with its own app id and secret, gets a
// tenant token of its own and is its own bot. An app id that AddApp did
// not name is the default app, as before: its token is
// t-fake-tenant-token and its bot BotOpenID.

// App is one more Feishu app installed in the fake tenant.
type App struct {
	AppID, AppSecret string
	BotOpenID        string
}

// defaultToken is the tenant token of the default app.
const defaultToken = "t-fake-tenant-token"

// AddApp installs another app: its id and secret get a token of its own,
// its bot info names BotOpenID, and what it sends is its bot's (SentBy).
func (s *Server) AddApp(a App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps = append(s.apps, a)
}

// tokenFor answers the tenant_access_token request in body: the token of
// the app it names, or "" when an added app's secret is wrong.
func (s *Server) tokenFor(body []byte) string {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	_ = json.Unmarshal(body, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		if a.AppID == req.AppID {
			if a.AppSecret != req.AppSecret {
				return ""
			}
			return "t-" + a.AppID
		}
	}
	return defaultToken
}

// botOf is the bot open_id of the app whose tenant token r carries, and
// whether it is a token the fake gave.
func (s *Server) botOf(r *http.Request) (string, bool) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == defaultToken {
		return BotOpenID, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		if token == "t-"+a.AppID {
			return a.BotOpenID, true
		}
	}
	return "", false
}

// SentBy lists what the app whose bot is botOpenID sent, in order.
func (s *Server) SentBy(botOpenID string) []Sent {
	var out []Sent
	for _, m := range s.Sent() {
		s.mu.Lock()
		by := s.sentBy[m.MessageID]
		s.mu.Unlock()
		if by == botOpenID {
			out = append(out, m)
		}
	}
	return out
}

// PushTo sends an event over a long connection of the app with appID, as
// Feishu pushes each app's events on that app's own connections, and
// returns the code the client answered.
func (s *Server) PushTo(ctx context.Context, appID string, event []byte) (int, error) {
	resp, err := s.pushTo(ctx, func(p *wsPeer) bool { return p.app == appID }, event, 1)
	return resp.StatusCode, err
}

// ConnectionsOf counts the open long connections of the app with appID.
func (s *Server) ConnectionsOf(appID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.peersLocked() {
		if p.app == appID {
			n++
		}
	}
	return n
}
