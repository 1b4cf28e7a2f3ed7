package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/config"
)

var pages = []string{"/admin/", "/admin/skills", "/admin/policies", "/admin/conversations", "/admin/tools"}

func TestNobodySignedInGetsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	for _, p := range pages {
		resp := c.get(p)
		if resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/admin/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /admin/login", p, resp.status, resp.header.Get("Location"))
		}
		if strings.Contains(resp.body, "release-notes") {
			t.Errorf("GET %s without a session shows state", p)
		}
	}
	changes := []struct {
		path string
		form url.Values
	}{
		{"/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}}},
		{"/admin/conversations", url.Values{"action": {"reset"}, "c": {"slack:T1:C1:1.0"}}},
		{"/admin/logout", nil},
	}
	for _, ch := range changes {
		if resp := c.post(ch.path, ch.form); resp.status != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d, want 401", ch.path, resp.status)
		}
	}
	if off, _ := r.state.Disabled(context.Background()); off["release-notes"] {
		t.Fatal("an unauthenticated POST turned a skill off")
	}
}

func TestWrongTokenIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	for _, token := range []string{"", "wrong", testToken + "x", testToken[:len(testToken)-1], strings.ToUpper(testToken)} {
		resp := c.post("/admin/login", url.Values{"token": {token}})
		if resp.status != http.StatusUnauthorized || resp.header.Get("Set-Cookie") != "" {
			t.Errorf("token %q: %d, cookie %q; want 401 and no cookie", token, resp.status, resp.header.Get("Set-Cookie"))
		}
		if strings.Contains(resp.body, testToken) {
			t.Errorf("the refusal reveals the token")
		}
	}
	for _, auth := range []string{"Bearer wrong", "Bearer  " + testToken, "Basic " + testToken, testToken, "Bearer"} {
		for _, p := range []string{"/admin/", "/admin/skills"} {
			if resp := c.get(p, "Authorization", auth); resp.status != http.StatusUnauthorized {
				t.Errorf("GET %s with Authorization %q: %d, want 401", p, auth, resp.status)
			}
		}
	}
	if !strings.Contains(r.log.String(), "failed sign-in") {
		t.Error("failed sign-ins are not logged")
	}
	if strings.Contains(r.log.String(), testToken) {
		t.Error("the log holds the token")
	}
}

func TestFailedSignInsAreThrottled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	statuses := map[int]int{}
	for range 30 {
		statuses[c.post("/admin/login", url.Values{"token": {"guess"}}).status]++
	}
	if statuses[http.StatusTooManyRequests] == 0 {
		t.Fatalf("30 wrong tokens in a row, none throttled: %v", statuses)
	}
	// The throttle is asked first: the right token from the throttled
	// address is refused too until the allowance refills, then signs in
	// (from another address it signs in at once: TestSignInThrottleAsksFirst).
	if got := c.post("/admin/login", url.Values{"token": {testToken}}).status; got != http.StatusTooManyRequests {
		t.Fatalf("the right token from the throttled address: %d, want 429", got)
	}
	r.clock.advance(time.Minute)
	c.signIn()
}

func TestSignInCookie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tls    bool
		secure bool
	}{{"plain HTTP", false, false}, {"TLS", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			r := w.replica(t, "a", options{tls: tc.tls})
			c := r.client(t)
			resp := c.post("/admin/login", url.Values{"token": {testToken}})
			if resp.status != http.StatusSeeOther {
				t.Fatalf("sign-in: %d", resp.status)
			}
			cookies := (&http.Response{Header: resp.header}).Cookies()
			if len(cookies) != 1 {
				t.Fatalf("cookies: %v", cookies)
			}
			ck := cookies[0]
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != tc.secure || ck.Path != "/admin/" {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v, Path=/admin/", ck, tc.secure)
			}
			if strings.Contains(ck.Value, testToken) {
				t.Error("the cookie carries the token")
			}
			for _, p := range pages {
				if got := c.get(p); got.status != http.StatusOK {
					t.Errorf("GET %s signed in: %d", p, got.status)
				}
			}
		})
	}
}

func TestExpiredSessionMustSignInAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{admin: func(a *config.Admin) { a.SessionTTL = time.Hour }})
	c := r.client(t)
	c.signIn()
	if got := c.get("/admin/"); got.status != http.StatusOK {
		t.Fatalf("signed in: %d", got.status)
	}
	r.clock.advance(time.Hour + time.Second)
	if got := c.get("/admin/"); got.status != http.StatusSeeOther || got.header.Get("Location") != "/admin/login" {
		t.Fatalf("after the session's TTL: %d to %q, want 303 to /admin/login", got.status, got.header.Get("Location"))
	}
	// Redis keeps the session no longer than its TTL either.
	keys, err := w.redis.Client.Keys(context.Background(), w.redis.Prefix+"admin:session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys %v, %v", keys, err)
	}
	ttl := w.redis.Client.TTL(context.Background(), keys[0]).Val()
	if ttl <= 0 || ttl > time.Hour {
		t.Fatalf("session key TTL %v, want (0, 1h]", ttl)
	}
}

func TestSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	b := w.replica(t, "b", options{})
	c := a.client(t)
	csrf := c.signIn()
	// The same cookie works on the other replica: sessions live in Redis.
	other := b.client(t)
	u, _ := url.Parse(a.srv.URL + "/admin/")
	ub, _ := url.Parse(b.srv.URL + "/admin/")
	other.http.Jar.SetCookies(ub, c.http.Jar.Cookies(u))
	if got := other.get("/admin/"); got.status != http.StatusOK {
		t.Fatalf("the session on the other replica: %d", got.status)
	}
	if got := c.post("/admin/logout", url.Values{"csrf": {csrf}}); got.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", got.status)
	}
	if got := other.get("/admin/"); got.status != http.StatusSeeOther {
		t.Fatalf("after sign-out, the other replica still accepts the session: %d", got.status)
	}
}

func TestChangesNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	other := r.client(t).signIn() // another session's token
	cases := []struct {
		name   string
		csrf   string
		header []string
	}{
		{"missing", "", nil},
		{"wrong", strings.Repeat("0", 64), nil},
		{"another session's", other, nil},
		{"right token, cross-site request", csrf, []string{"Sec-Fetch-Site", "cross-site"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"action": {"off"}, "skill": {"release-notes"}}
			if tc.csrf != "" {
				form.Set("csrf", tc.csrf)
			}
			if got := c.post("/admin/skills", form, tc.header...); got.status != http.StatusForbidden {
				t.Fatalf("POST: %d, want 403", got.status)
			}
			form = url.Values{"action": {"reset"}, "c": {"slack:T1:C1:1.0"}, "csrf": {tc.csrf}}
			if got := c.post("/admin/conversations", form, tc.header...); got.status != http.StatusForbidden {
				t.Fatalf("POST conversations: %d, want 403", got.status)
			}
		})
	}
	if off, _ := r.state.Disabled(context.Background()); off["release-notes"] {
		t.Fatal("a change without the right CSRF token was made")
	}
	got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}, "csrf": {csrf}})
	if got.status != http.StatusSeeOther {
		t.Fatalf("with the token: %d", got.status)
	}
	if off, _ := r.state.Disabled(context.Background()); !off["release-notes"] {
		t.Fatal("the change with the right token was not made")
	}
}

func TestBearerTokenForScripts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	for _, p := range pages {
		if got := c.get(p, "Authorization", "Bearer "+testToken); got.status != http.StatusOK {
			t.Errorf("GET %s with the bearer token: %d", p, got.status)
		}
	}
	// A bearer's request is not one a browser sends on its own: no CSRF.
	got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}}, "Authorization", "Bearer "+testToken)
	if got.status != http.StatusSeeOther {
		t.Fatalf("POST with the bearer token: %d %s", got.status, got.body)
	}
	if off, _ := r.state.Disabled(context.Background()); !off["release-notes"] {
		t.Fatal("the bearer's change was not made")
	}
	if len(c.http.Jar.Cookies(mustURL(r.srv.URL+"/admin/"))) != 0 {
		t.Fatal("a bearer request got a session cookie")
	}
}

func TestTrustedHeaderOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct {
		name    string
		proxies []string
		trusted bool
	}{
		{"from a trusted proxy", []string{"127.0.0.0/8"}, true},
		{"from an address that is not a trusted proxy", []string{"10.0.0.0/8"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.replica(t, "p", options{admin: func(a *config.Admin) {
				a.TrustedHeader, a.TrustedProxies = "X-Forwarded-User", tc.proxies
			}})
			c := r.client(t)
			got := c.get("/admin/", "X-Forwarded-User", "alice@example.com")
			if !tc.trusted {
				if got.status != http.StatusSeeOther || strings.Contains(got.body, "alice") {
					t.Fatalf("header from an untrusted address: %d, want 303 to sign-in", got.status)
				}
				if got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}}, "X-Forwarded-User", "alice@example.com"); got.status != http.StatusUnauthorized {
					t.Fatalf("POST with the header from an untrusted address: %d, want 401", got.status)
				}
				return
			}
			if got.status != http.StatusOK || !strings.Contains(got.body, "alice@example.com") {
				t.Fatalf("header from a trusted proxy: %d", got.status)
			}
			m := csrfRE.FindStringSubmatch(got.body)
			if m == nil {
				t.Fatal("no CSRF token for the proxy's user")
			}
			// The header user needs the CSRF token like anyone else…
			if got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}}, "X-Forwarded-User", "alice@example.com"); got.status != http.StatusForbidden {
				t.Fatalf("header user without CSRF: %d, want 403", got.status)
			}
			// …and another user cannot ride alice's session.
			if got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}, "csrf": {m[1]}}, "X-Forwarded-User", "mallory"); got.status != http.StatusForbidden {
				t.Fatalf("another header user with alice's session: %d, want 403", got.status)
			}
			if got := c.post("/admin/skills", url.Values{"action": {"off"}, "skill": {"release-notes"}, "csrf": {m[1]}}, "X-Forwarded-User", "alice@example.com"); got.status != http.StatusSeeOther {
				t.Fatalf("header user with CSRF: %d", got.status)
			}
			if !strings.Contains(r.log.String(), "user=alice@example.com") {
				t.Fatal("the audit log does not name the proxy's user")
			}
			_ = r.state.SetDisabled(context.Background(), "release-notes", false)
		})
	}
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	c.signIn()
	for _, p := range append(pages, "/admin/login", "/admin/assets/admin.css", "/admin/nope", "/elsewhere") {
		got := c.get(p)
		csp := got.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if got.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
	}
}

func TestOversizedFormIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	got := c.post("/admin/skills", url.Values{"csrf": {csrf}, "action": {"off"}, "skill": {strings.Repeat("a", 100<<10)}})
	if got.status != http.StatusBadRequest {
		t.Fatalf("100 KiB form: %d, want 400", got.status)
	}
	got = c.post("/admin/login", url.Values{"token": {strings.Repeat("a", 100<<10)}})
	if got.status != http.StatusBadRequest {
		t.Fatalf("100 KiB sign-in: %d, want 400", got.status)
	}
}

func TestConsoleNeedsAWayToSignIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		admin config.Admin
		on    bool
	}{
		{config.Admin{Listen: "127.0.0.1:8081"}, false},
		{config.Admin{Listen: "", Token: testToken}, false},
		{config.Admin{Listen: "off", Token: testToken}, false},
		{config.Admin{Listen: "127.0.0.1:8081", Token: testToken}, true},
		{config.Admin{Listen: "127.0.0.1:8081", TrustedHeader: "X-Forwarded-User", TrustedProxies: []string{"10.0.0.1"}}, true},
	} {
		if got := tc.admin.Enabled(); got != tc.on {
			t.Errorf("%+v: Enabled %v, want %v", tc.admin, got, tc.on)
		}
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
