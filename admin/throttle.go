package admin

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// signInLimiter limits failed sign-ins — a wrong token on the form or in
// "Authorization: Bearer" — per remote address, or per user a trusted
// proxy names. It is asked before the token is compared, so that once an
// address is refused (429) guessing on from it learns nothing, not even
// the right token; only failures spend the allowance, so a flood of
// guesses from one address does not lock operators elsewhere out.
type signInLimiter struct {
	every time.Duration
	burst int

	mu   sync.Mutex
	byID map[string]*rate.Limiter
}

// maxTrackedSignIns bounds the addresses remembered. Past it the ones
// whose allowance is whole again are forgotten, and if that frees nothing,
// all are: a guesser with that many addresses gets a fresh allowance, the
// replica keeps its memory.
const maxTrackedSignIns = 10000

func newSignInLimiter(every time.Duration, burst int) *signInLimiter {
	return &signInLimiter{every: every, burst: burst, byID: map[string]*rate.Limiter{}}
}

// attempt takes one of id's attempts before its token is compared, or
// reports false when none is left. Taking it first keeps concurrent
// guesses from all passing a check made before any of them failed; the
// caller gives it back with refund when the token was right, so only
// failures spend the allowance.
func (l *signInLimiter) attempt(id string, now time.Time) (refund func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, found := l.byID[id]
	if !found {
		if len(l.byID) >= maxTrackedSignIns {
			l.forget(now)
		}
		lim = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.byID[id] = lim
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() || r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return nil, false
	}
	return func() { r.CancelAt(now) }, true
}

// forget drops the limiters whose allowance is whole again, or all of
// them if none is.
func (l *signInLimiter) forget(now time.Time) {
	for id, lim := range l.byID {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.byID, id)
		}
	}
	if len(l.byID) >= maxTrackedSignIns {
		clear(l.byID)
	}
}

// signInID is whom a sign-in attempt is counted against: the user a
// trusted proxy names (every user behind it shares its address), else the
// remote address.
func (s *Server) signInID(r *http.Request) string {
	if user, ok := s.headerUser(r); ok {
		return "user:" + user
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return "addr:" + ap.Addr().Unmap().String()
	}
	return "addr:" + r.RemoteAddr
}
