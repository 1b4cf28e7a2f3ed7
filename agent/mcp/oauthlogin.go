package mcp

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/parleyhq/parley/agent"
)

// LoginOptions are what Login needs beyond the configuration.
type LoginOptions struct {
	// Tokens is where the sign-in is kept: the deployment's RedisTokens,
	// so that every replica uses it. Required.
	Tokens TokenStore
	// Show is given the authorization URL for the operator to open. The
	// authorization server sends the browser to the admin console's
	// CallbackPath, which hands the answer to this Login.
	Show func(authURL string)
	// Log, Getenv and Version as in Options.
	Log     *slog.Logger
	Getenv  func(string) string
	Version string
}

// ErrNoOAuth is Login's answer for a server without an oauth: section or
// with the client credentials grant (it needs no operator).
var ErrNoOAuth = errors.New("the server has no oauth: section with the authorization code grant")

// Login signs the operator in to the configured server name with the
// authorization code flow: it connects, and when the server asks for
// OAuth, shows the authorization URL and waits (at most ten minutes, or
// until ctx ends) for the admin console to hand over the authorization
// server's answer; then it exchanges the code, keeping the PKCE verifier
// in this process only, stores the tokens in opts.Tokens, and lists the
// server's tools with them. It returns the server's state.
func Login(ctx context.Context, cfg Config, name string, opts LoginOptions) (ServerState, error) {
	sc, ok := cfg.Servers[name]
	if !ok {
		return ServerState{}, fmt.Errorf("no server %q under tools.mcp.servers", name)
	}
	if sc.OAuth == nil || sc.OAuth.grant() != GrantAuthorizationCode {
		return ServerState{}, ErrNoOAuth
	}
	if opts.Tokens == nil || opts.Show == nil {
		return ServerState{}, errors.New("mcp: LoginOptions.Tokens and Show are required")
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	store := opts.Tokens
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, err
		}
		state := u.Query().Get("state")
		if err := store.Expect(ctx, state, name, loginTimeout); err != nil {
			return nil, fmt.Errorf("recording the sign-in: %w", err)
		}
		opts.Show(args.URL)
		a, err := store.Await(ctx, state)
		if err != nil {
			return nil, fmt.Errorf("waiting for the sign-in: %w", err)
		}
		if a.Error != "" {
			return nil, fmt.Errorf("the authorization server refused the sign-in: %s %s", a.Error, cutText(a.Description, 200))
		}
		return &auth.AuthorizationResult{Code: a.Code, State: state, Iss: a.Iss}, nil
	}
	one := Config{Servers: map[string]ServerConfig{name: sc}, Retry: cfg.Retry}
	m, err := New(one, Options{Registry: agent.NewRegistry(), Log: opts.Log, Getenv: opts.Getenv, Version: opts.Version, Tokens: store, SignIn: fetch})
	if err != nil {
		return ServerState{}, err
	}
	defer m.Close()
	m.servers[0].oauth.fresh = true
	// One attempt: a sign-in that failed is the operator's to retry.
	m.timing.starts = 1
	if err := m.Start(ctx); err != nil {
		return ServerState{}, err
	}
	st := m.Servers()[0]
	if !st.Up {
		return st, fmt.Errorf("signing in to %s: %s", name, st.Err)
	}
	return st, nil
}

// Sizes past which a callback is refused unread: no real code or state
// comes near them.
const (
	maxStateLen = 256
	maxCodeLen  = 4096
)

// CallbackHandler is the admin console's CallbackPath: the authorization
// server sends the operator's browser here with the code (or the error)
// and the state. An answer reaches the `parley mcp login` waiting for
// that state, once; anything else — a forged or replayed state, an
// oversized or malformed request — is refused with a page that says no
// more than that.
func CallbackHandler(tokens TokenStore, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			callbackPage(w, http.StatusMethodNotAllowed, "This address only takes the authorization server's redirect.")
			return
		}
		q := r.URL.Query()
		state, code := q.Get("state"), q.Get("code")
		if state == "" || len(state) > maxStateLen || len(code) > maxCodeLen || len(q.Get("error_description")) > maxCodeLen || (code == "" && q.Get("error") == "") {
			log.Warn("mcp: oauth callback refused: malformed", "remote", r.RemoteAddr)
			callbackPage(w, http.StatusBadRequest, "This sign-in answer is not valid.")
			return
		}
		server, err := tokens.Deliver(r.Context(), state, Answer{Code: code, Iss: q.Get("iss"), Error: q.Get("error"), Description: q.Get("error_description")})
		switch {
		case errors.Is(err, ErrUnknownState):
			log.Warn("mcp: oauth callback refused: no sign-in expects it", "remote", r.RemoteAddr)
			callbackPage(w, http.StatusBadRequest, "No sign-in is waiting for this answer: it expired, was already used, or was not started by parley mcp login.")
			return
		case err != nil:
			log.Error("mcp: oauth callback: passing the answer on failed", "err", err)
			callbackPage(w, http.StatusServiceUnavailable, "The answer could not be passed on; run parley mcp login again.")
			return
		}
		log.Info("mcp: oauth callback passed to the waiting login", "server", server)
		callbackPage(w, http.StatusOK, "Signed in to "+server+": parley mcp login finishes in the terminal.")
	})
}

var callbackTmpl = template.Must(template.New("cb").Parse(`<!doctype html><meta charset="utf-8"><title>Parley: MCP sign-in</title><p>{{.}}</p>`))

func callbackPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	callbackTmpl.Execute(w, msg)
}
