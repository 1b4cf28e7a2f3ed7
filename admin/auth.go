package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// Who may use the console, and how a change is proven to come from its
// own pages:
//
//   - Signing in with PARLEY_ADMIN_TOKEN on /admin/login starts a session
//     kept in Redis (so every replica knows it, and it ends everywhere at
//     once); the browser holds only its random id, in an HttpOnly,
//     SameSite=Strict cookie that is Secure over TLS.
//   - "Authorization: Bearer TOKEN" signs a script in for one request.
//   - Behind an SSO proxy, the user named in admin.trusted_header is
//     believed when the request comes from admin.trusted_proxies, and
//     only then; the console keeps a session for that user for the CSRF
//     token.
//
// Every change (a POST) carries the session's CSRF token, except from a
// bearer, whose header a browser never sends on its own.

const (
	cookieName = "parley_admin"
	// maxUserLen bounds a user name taken from a proxy header.
	maxUserLen = 128
	// tokenUser is the user of a token sign-in: the token names no one.
	tokenUser = "token"
)

// Ways a request was authenticated.
const (
	viaSession = "session"
	viaBearer  = "bearer"
	viaHeader  = "header"
)

// identity is who made a request.
type identity struct {
	user string
	via  string
	sess *session // nil for a bearer, and for a header user until created
}

// session is one sign-in, as stored in Redis.
type session struct {
	id      string // the cookie's value; only its hash is a key
	user    string
	csrf    string
	expires time.Time
}

var errNoSession = errors.New("admin: no such session")

// errThrottled is a bearer attempt from an address past its failed
// sign-ins.
var errThrottled = errors.New("admin: too many failed sign-ins")

func (s *Server) sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.cfg.Prefix + "admin:session:" + hex.EncodeToString(sum[:])
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// newSession stores a session for user.
func (s *Server) newSession(ctx context.Context, user string) (*session, error) {
	sess := &session{id: randomToken(), user: user, csrf: randomToken(), expires: s.now().Add(s.cfg.Admin.SessionTTL)}
	key := s.sessionKey(sess.id)
	pipe := s.cfg.Redis.TxPipeline()
	pipe.HSet(ctx, key, "user", sess.user, "csrf", sess.csrf, "expires", strconv.FormatInt(sess.expires.Unix(), 10))
	pipe.Expire(ctx, key, s.cfg.Admin.SessionTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("admin: store session: %w", err)
	}
	return sess, nil
}

// loadSession reads the session of a cookie value. Expired sessions are
// gone: Redis drops them with their TTL, and the stored expiry is checked
// as well, so a clock that ran ahead of Redis's cannot extend one.
func (s *Server) loadSession(ctx context.Context, id string) (*session, error) {
	if len(id) != 64 {
		return nil, errNoSession
	}
	vals, err := s.cfg.Redis.HGetAll(ctx, s.sessionKey(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("admin: read session: %w", err)
	}
	exp, err := strconv.ParseInt(vals["expires"], 10, 64)
	if err != nil || vals["user"] == "" || vals["csrf"] == "" {
		return nil, errNoSession
	}
	sess := &session{id: id, user: vals["user"], csrf: vals["csrf"], expires: time.Unix(exp, 0)}
	if !s.now().Before(sess.expires) {
		return nil, errNoSession
	}
	return sess, nil
}

func (s *Server) endSession(ctx context.Context, id string) error {
	return s.cfg.Redis.Del(ctx, s.sessionKey(id)).Err()
}

// authenticate says who made r, if anyone did. A request that presents a
// bearer token or a proxy header stands or falls by it; it never falls
// back to a cookie.
func (s *Server) authenticate(r *http.Request) (identity, bool, error) {
	if user, ok := s.headerUser(r); ok {
		id := identity{user: user, via: viaHeader}
		if sess, err := s.cookieSession(r); err == nil && sess.user == user {
			id.sess = sess
		}
		return id, true, nil
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			return identity{}, false, nil
		}
		// A bearer guess is a sign-in attempt: asked first, and counted
		// when it fails.
		refund, allowed := s.logins.attempt(s.signInID(r), s.now())
		if !allowed {
			return identity{}, false, errThrottled
		}
		if s.tokenMatches(token) {
			refund()
			return identity{user: tokenUser, via: viaBearer}, true, nil
		}
		return identity{}, false, nil
	}
	sess, err := s.cookieSession(r)
	if errors.Is(err, errNoSession) {
		return identity{}, false, nil
	}
	if err != nil {
		return identity{}, false, err
	}
	return identity{user: sess.user, via: viaSession, sess: sess}, true, nil
}

func (s *Server) cookieSession(r *http.Request) (*session, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, errNoSession
	}
	return s.loadSession(r.Context(), c.Value)
}

// tokenMatches compares in constant time; hashing first makes the time
// independent of the length of either.
func (s *Server) tokenMatches(given string) bool {
	if !s.cfg.Admin.Token.IsSet() || given == "" {
		return false
	}
	a := sha256.Sum256([]byte(given))
	b := sha256.Sum256([]byte(s.cfg.Admin.Token.Reveal()))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// headerUser is the user an SSO proxy named, when the request comes from
// one of the trusted proxies; from anywhere else the header is ignored.
func (s *Server) headerUser(r *http.Request) (string, bool) {
	if s.cfg.Admin.TrustedHeader == "" {
		return "", false
	}
	user := strings.TrimSpace(r.Header.Get(s.cfg.Admin.TrustedHeader))
	if user == "" || len(user) > maxUserLen || strings.IndexFunc(user, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
		return "", false
	}
	if !s.fromTrustedProxy(r) {
		return "", false
	}
	return user, true
}

func (s *Server) fromTrustedProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range s.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// secure reports whether the browser reached the console over TLS: directly,
// or through a trusted proxy that says so.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || (s.fromTrustedProxy(r) && r.Header.Get("X-Forwarded-Proto") == "https")
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, sess *session) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: sess.id, Path: "/admin/",
		MaxAge: int(time.Until(sess.expires).Seconds()), HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode,
	})
}

func (s *Server) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/admin/", MaxAge: -1, HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
}

// checkCSRF accepts a change from a bearer, or one that carries its
// session's token in the form field csrf and does not come from another
// site.
func (s *Server) checkCSRF(r *http.Request, id identity) bool {
	if id.via == viaBearer {
		return true
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return false
	}
	if id.sess == nil {
		return false
	}
	given := r.PostFormValue("csrf")
	return given != "" && subtle.ConstantTimeCompare([]byte(given), []byte(id.sess.csrf)) == 1
}

// isRedisNil keeps redis.Nil from reading as a failure.
func isRedisNil(err error) bool { return errors.Is(err, redis.Nil) }
