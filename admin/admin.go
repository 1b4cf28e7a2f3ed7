// Package admin is Parley's admin console: a small server-rendered web
// application for operators, on a listener of its own, that shows what
// the CLI shows and does what the admin chat commands do — across every
// replica, since all state is in Redis.
//
// It reads and changes state only through the packages the chat commands
// and the CLI use: the skill registry and state (skills), policy
// explanations (policy), histories (sessions), and the gateway's reset and
// compaction, which it is handed as the Conversations interface; the tools
// come from the same listing as `parley tools list`. Templates and the
// stylesheet are embedded; pages need no JavaScript, and the
// Content-Security-Policy allows none.
package admin

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent/mcp"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
	"github.com/parleyhq/parley/skills"
	"github.com/parleyhq/parley/triggers/schedule"
	"github.com/parleyhq/parley/triggers/webhook"
	"github.com/redis/go-redis/v9"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Conversations resets and compacts conversations the way the chat's
// /reset and /compact do; *gateway.Gateway implements it.
type Conversations interface {
	// ResetConversation and CompactConversation fail with an error that
	// is sessions.ErrLocked while a turn of conv runs.
	ResetConversation(ctx context.Context, conv string) error
	// CompactConversation returns "ok" when it compacted and "nothing"
	// when the history was too short to.
	CompactConversation(ctx context.Context, conv string) (string, error)
}

// ToolStatus is one line of `parley tools list`.
type ToolStatus struct {
	Name        string
	Source      string // builtin or mcp:SERVER
	Class       string // read or write; empty for a server without tools
	ClassRule   string
	ServerState string // up or down for MCP tools
	ServerError string
}

// Triggers lists what makes Parley speak first, as `parley triggers
// list` does (triggers/schedule's and triggers/webhook's Lister).
type Triggers interface {
	Schedules(ctx context.Context) ([]schedule.Status, error)
	Webhooks(ctx context.Context) ([]webhook.Status, error)
}

// Tools is the tool listing of this replica.
type Tools interface {
	// ToolStatuses lists every tool and MCP server, as `parley tools list`.
	ToolStatuses() []ToolStatus
	// PolicyTools describes the tools for a policy explanation, as
	// `parley policy explain` does.
	PolicyTools() []policy.ToolInfo
}

// Skills is the console's handle on the skill system: the same registry,
// state and reload the chat's /skill commands use.
type Skills struct {
	Registry *skills.Registry
	State    skills.State
	// Reload reloads every replica (nil: this one only).
	Reload func(ctx context.Context) (*skills.Catalog, error)
	// Home is $PARLEY_HOME, whose supplement notes a skill's references
	// show, as load_skill reads them.
	Home string
}

// Config is what the console needs. Every field but Grafana and Now is
// required.
type Config struct {
	Admin  config.Admin
	Redis  redis.UniversalClient
	Prefix string
	Store  *sessions.RedisStore

	Skills        Skills
	Policy        *policy.Resolver
	Tools         Tools
	Conversations Conversations
	// Triggers lists the schedules and webhooks (nil: the Triggers page
	// says there are none).
	Triggers Triggers
	// Accounts lists this replica's accounts and their state, for the
	// overview (nil: it shows none).
	Accounts Accounts

	// Replica is this replica's heartbeat ID, marked on the overview.
	Replica string
	// Audit is the audit ledger the console records its changes in and
	// the Audit page reads (nil: the ledger under Prefix with the default
	// retention).
	Audit *audit.Ledger
	Log   *slog.Logger
	// Now is the clock (nil: time.Now); tests move it to expire sessions.
	Now func() time.Time
}

// Server serves the console under /admin/.
type Server struct {
	cfg     Config
	log     *slog.Logger
	proxies []netip.Prefix
	pages   map[string]*template.Template
	mux     *http.ServeMux
	ledger  *audit.Ledger
	// logins limits failed sign-ins on this replica, by address: guessing
	// a token over the network stays hopeless.
	logins *signInLimiter
	// refusals keeps refused requests (bad sign-ins, forms without their
	// CSRF token, requests signed in as nobody) from flooding the log.
	refusals *logthrottle.Throttle
}

// Limits of one request.
const (
	maxBodyBytes = 64 << 10
	// loginBurst failed sign-ins, then one a second.
	loginBurst = 10
)

// New builds the console.
func New(cfg Config) (*Server, error) {
	if cfg.Redis == nil || cfg.Store == nil || cfg.Skills.Registry == nil || cfg.Skills.State == nil || cfg.Policy == nil || cfg.Tools == nil || cfg.Conversations == nil {
		return nil, errors.New("admin: Redis, Store, Skills, Policy, Tools and Conversations are required")
	}
	if !cfg.Admin.Token.IsSet() && cfg.Admin.TrustedHeader == "" {
		return nil, errors.New("admin: neither a token (PARLEY_ADMIN_TOKEN) nor admin.trusted_header is set: nobody could sign in")
	}
	if cfg.Admin.SessionTTL <= 0 {
		cfg.Admin.SessionTTL = config.DefaultAdminSessionTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log.With("component", "admin"), proxies: cfg.Admin.Proxies(), logins: newSignInLimiter(time.Second, loginBurst),
		refusals: logthrottle.New(logthrottle.DefaultEvery, cfg.Now), ledger: cfg.Audit}
	if s.ledger == nil {
		s.ledger = audit.New(cfg.Redis, audit.Options{Prefix: cfg.Prefix, Replica: cfg.Replica, Log: log, Now: cfg.Now})
	}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// HTTPServer returns an http.Server for the console with the timeouts and
// limits a listener of its own should have.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// contentSecurityPolicy allows the console's own stylesheet and icon and
// nothing else: no scripts, no frames, no other origins, forms only back
// to the console.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	files := http.StripPrefix("/admin/assets/", http.FileServerFS(assets))
	mux.HandleFunc("GET /admin/assets/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no listings
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/assets/icon.svg", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /admin", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /admin/login", s.loginPage)
	mux.HandleFunc("POST /admin/login", s.login)
	mux.Handle("POST /admin/logout", s.change(s.logout))
	mux.Handle("GET /admin/{$}", s.page(s.overview))
	mux.Handle("GET /admin/skills", s.page(s.skillsPage))
	mux.Handle("POST /admin/skills", s.change(s.skillAction))
	mux.Handle("GET /admin/policies", s.page(s.policiesPage))
	mux.Handle("GET /admin/conversations", s.page(s.conversationsPage))
	mux.Handle("POST /admin/conversations", s.change(s.conversationAction))
	mux.Handle("GET /admin/tools", s.page(s.toolsPage))
	mux.Handle("GET /admin/audit", s.page(s.auditPage))
	mux.Handle("GET /admin/triggers", s.page(s.triggersPage))
	mux.Handle("GET "+mcp.CallbackPath, s.mcpOAuthCallback())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	})
	s.mux = mux
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string // the active page
	User  string
	// Token is set for a sign-in with the admin token, which names no
	// one: the page says so instead of "as token".
	Token  bool
	CSRF   string
	Notice string // the outcome of the change that led here
	Error  string
	Data   any
}

// pageFunc fills a page's view; an error is shown as a 500 without detail.
type pageFunc func(r *http.Request, id identity, v *view) (template string, err error)

// page authenticates a GET and renders the page.
func (s *Server) page(fn pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.require(w, r)
		if !ok {
			return
		}
		if id.via == viaHeader && id.sess == nil {
			// A proxy's user gets a session for the CSRF token of its
			// forms; the header still decides who it is on every request.
			sess, err := s.newSession(r.Context(), id.user)
			if err != nil {
				s.fail(w, r, "create session", err)
				return
			}
			id.sess = sess
			s.setCookie(w, r, sess)
		}
		v := &view{User: id.user, Token: id.user == tokenUser && id.via != viaHeader}
		if id.sess != nil {
			v.CSRF = id.sess.csrf
		}
		v.Notice = notice(r)
		name, err := fn(r, id, v)
		var bad badRequest
		if errors.As(err, &bad) {
			v.Error = bad.msg
			s.render(w, http.StatusBadRequest, name, v)
			return
		}
		if err != nil {
			s.fail(w, r, "render "+r.URL.Path, err)
			return
		}
		s.render(w, http.StatusOK, name, v)
	})
}

// changeFunc makes a change and returns where to go next.
type changeFunc func(w http.ResponseWriter, r *http.Request, id identity) (redirect string, status int, err error)

// change authenticates a POST, checks its CSRF token, runs it and
// redirects (303) to the page that shows the outcome.
func (s *Server) change(fn changeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.require(w, r)
		if !ok {
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if !s.checkCSRF(r, id) {
			s.refusals.Log(r.Context(), s.log, slog.LevelWarn, "csrf", "admin", "admin: change refused: missing or wrong CSRF token", "user", id.user, "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "forbidden: this form has expired; reload the page and try again", http.StatusForbidden)
			return
		}
		to, status, err := fn(w, r, id)
		if err != nil {
			s.fail(w, r, "change "+r.URL.Path, err)
			return
		}
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	})
}

// require answers a request nobody signed in for: a page sends the
// browser to the sign-in form, anything else gets a bare 401.
func (s *Server) require(w http.ResponseWriter, r *http.Request) (identity, bool) {
	id, ok, err := s.authenticate(r)
	if errors.Is(err, errThrottled) {
		s.throttled(w, r)
		return identity{}, false
	}
	if err != nil {
		s.fail(w, r, "authenticate", err)
		return identity{}, false
	}
	if ok {
		return id, true
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodGet && s.cfg.Admin.Token.IsSet() && r.Header.Get("Authorization") == "" {
		http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
		return identity{}, false
	}
	s.refusals.Log(r.Context(), s.log, slog.LevelWarn, "unauthenticated", "admin", "admin: request refused: not signed in", "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", `Bearer realm="parley admin"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return identity{}, false
}

// throttled answers an attempt from an address (or proxy user) whose
// failed sign-ins are past the limit.
func (s *Server) throttled(w http.ResponseWriter, r *http.Request) {
	s.refusals.Log(r.Context(), s.log, slog.LevelWarn, "too_many_sign_ins", "admin", "admin: sign-in refused: too many failed attempts", "remote", r.RemoteAddr)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many attempts; wait a moment", http.StatusTooManyRequests)
}

// fail logs err and answers 500 without detail.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("admin: "+what, "err", err, "path", r.URL.Path)
	http.Error(w, "internal error; the log says why", http.StatusInternalServerError)
}

func (s *Server) render(w http.ResponseWriter, status int, name string, v *view) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		s.log.Error("admin: template", "page", name, "err", err)
		http.Error(w, "internal error; the log says why", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// audit records a change in the audit ledger, which logs it too; the
// remote address goes only to this log.
func (s *Server) audit(r *http.Request, id identity, action, target, outcome string) {
	s.log.Info("audit: admin console change", "user", id.user, "via", id.via, "action", action, "target", target, "outcome", outcome, "remote", r.RemoteAddr)
	// The ledger logs what it cannot keep; the change stands either way.
	_ = s.ledger.Record(r.Context(), audit.Entry{Kind: audit.KindAdmin, User: id.user, Via: id.via, Action: action, Target: target, Outcome: outcome})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if id, ok, _ := s.authenticate(r); ok && id.via != viaBearer {
		http.Redirect(w, r, "/admin/", http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "login", &view{Title: "Sign in", Data: s.cfg.Admin.Token.IsSet()})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Admin.Token.IsSet() {
		http.Error(w, "sign-in with a token is not configured here", http.StatusNotFound)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	// Asked before the token is compared: a refused address learns
	// nothing from its next guesses. Only failures spend the allowance.
	refund, ok := s.logins.attempt(s.signInID(r), s.now())
	if !ok {
		s.throttled(w, r)
		return
	}
	if !s.tokenMatches(r.PostFormValue("token")) {
		s.refusals.Log(r.Context(), s.log, slog.LevelWarn, "bad_token", "admin", "admin: failed sign-in", "remote", r.RemoteAddr)
		s.render(w, http.StatusUnauthorized, "login", &view{Title: "Sign in", Error: "That token is not right.", Data: true})
		return
	}
	refund()
	sess, err := s.newSession(r.Context(), tokenUser)
	if err != nil {
		s.fail(w, r, "sign in", err)
		return
	}
	s.setCookie(w, r, sess)
	s.audit(r, identity{user: sess.user, via: viaSession}, "sign-in", "", "ok")
	http.Redirect(w, r, "/admin/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, id identity) (string, int, error) {
	if id.sess != nil {
		if err := s.endSession(r.Context(), id.sess.id); err != nil {
			return "", 0, err
		}
	}
	s.clearCookie(w, r)
	s.audit(r, id, "sign-out", "", "ok")
	return "/admin/login", 0, nil
}
