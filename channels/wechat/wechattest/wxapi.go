package wechattest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// api is what the fake WeCom app API and the fake Official Account API
// share: the access token they hand out and check, the calls they
// record, and the failures a test scripts.
type api struct {
	srv *httptest.Server
	// tokenPath and tokenParams name the token endpoint and the query
	// parameters that must carry the credentials.
	tokenPath   string
	idParam     string
	secretParam string
	id, secret  string

	mu          sync.Mutex
	token       string
	issued      int
	expiresIn   int
	tokenDelay  time.Duration
	inFlight    int
	maxInFlight int
	tokenCalls  []Call
	calls       []Call
	failures    map[string][]Failure
	handlers    map[string]func(c *Call) (code int, msg string)
	media       map[string]mediaFile // temporary media by media_id (media.go)
	mediaCalls  int
	mediaServed int64
	up          uploadStore // media uploads, media messages, dropped answers (upload.go)
}

// Call is one request a fake received.
type Call struct {
	Path    string
	Replica string // the ReplicaHeader of the request
	Token   string // the access_token it carried
	Body    json.RawMessage
	// Code is the errcode the fake answered (0 for success), Status the
	// HTTP status when a failure scripted one.
	Code   int
	Status int
	// Duplicate marks a message the platform's duplicate check dropped,
	// Answer what the fake answered besides errcode and errmsg (upload.go).
	Duplicate bool
	Answer    map[string]any
}

// Failure is a scripted answer to one call: an HTTP status, or errcode
// Code with errmsg Msg.
type Failure struct {
	Status int
	Code   int
	Msg    string
	// Pass lets the call through, so that a failure can be scripted
	// after some successes.
	Pass bool
}

func newAPI(t testing.TB, tokenPath, idParam, secretParam, id, secret string) *api {
	a := &api{tokenPath: tokenPath, idParam: idParam, secretParam: secretParam, id: id, secret: secret,
		expiresIn: 7200, failures: map[string][]Failure{}, handlers: map[string]func(*Call) (int, string){}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.handle))
	t.Cleanup(a.srv.Close)
	return a
}

// URL is the fake's base URL (the base_url of the configuration).
func (a *api) URL() string { return a.srv.URL }

// Token is the access token the fake currently accepts ("" before the
// first fetch).
func (a *api) Token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// ExpireToken makes the current token invalid: calls with it are answered
// errcode 42001 until a new one is fetched.
func (a *api) ExpireToken() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = "expired-" + a.token
}

// SetTokenDelay makes the token endpoint take d, so that concurrent
// fetches would overlap.
func (a *api) SetTokenDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokenDelay = d
}

// SetExpiresIn sets the lifetime of the tokens handed out, in seconds.
func (a *api) SetExpiresIn(sec int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expiresIn = sec
}

// Fail scripts the answers of the next calls to path (e.g.
// "/cgi-bin/message/send"), consumed in order.
func (a *api) Fail(path string, fs ...Failure) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures[path] = append(a.failures[path], fs...)
}

// ClearFailures drops the failures not yet consumed.
func (a *api) ClearFailures() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures = map[string][]Failure{}
}

// TokenCalls returns every token request.
func (a *api) TokenCalls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.tokenCalls...)
}

// MaxConcurrentTokenCalls is the most token requests that were in flight
// at once.
func (a *api) MaxConcurrentTokenCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maxInFlight
}

// Calls returns the calls to path, all of them when path is "".
func (a *api) Calls(path string) []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Call
	for _, c := range a.calls {
		if path == "" || c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// Delivered returns the successful calls to path.
func (a *api) Delivered(path string) []Call {
	var out []Call
	for _, c := range a.Calls(path) {
		if c.Code == 0 && c.Status == 0 {
			out = append(out, c)
		}
	}
	return out
}

func (a *api) handle(w http.ResponseWriter, r *http.Request) {
	if a.dropAnswer(w, r) { // upload.go
		return
	}
	if r.URL.Path == MediaUploadPath { // upload.go
		a.serveUpload(w, r)
		return
	}
	if r.URL.Path == a.tokenPath {
		a.serveToken(w, r)
		return
	}
	if r.URL.Path == MediaGetPath && r.Method == http.MethodGet {
		a.serveMedia(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	c := Call{Path: r.URL.Path, Replica: r.Header.Get(ReplicaHeader), Token: r.URL.Query().Get("access_token"), Body: body}
	a.mu.Lock()
	h, ok := a.handlers[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		a.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	var f *Failure
	if fs := a.failures[c.Path]; len(fs) > 0 {
		f, a.failures[c.Path] = &fs[0], fs[1:]
	}
	if f != nil && f.Pass {
		f = nil
	}
	valid := a.token != "" && c.Token == a.token
	a.mu.Unlock()

	code, msg := 0, "ok"
	switch {
	case f != nil && f.Status != 0:
		c.Status = f.Status
	case f != nil:
		code, msg = f.Code, f.Msg
	case !valid:
		code, msg = 42001, "access_token expired"
	case !json.Valid(body):
		code, msg = 47001, "data format error"
	default:
		code, msg = h(&c)
	}
	c.Code = code
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
	if c.Status != 0 {
		http.Error(w, http.StatusText(c.Status), c.Status)
		return
	}
	out := map[string]any{"errcode": code, "errmsg": msg}
	for k, v := range c.Answer { // upload.go
		out[k] = v
	}
	writeJSON(w, out)
}

func (a *api) serveToken(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.inFlight++
	a.maxInFlight = max(a.maxInFlight, a.inFlight)
	delay := a.tokenDelay
	a.tokenCalls = append(a.tokenCalls, Call{Path: r.URL.Path, Replica: r.Header.Get(ReplicaHeader)})
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if q.Get(a.idParam) != a.id || q.Get(a.secretParam) != a.secret {
		writeJSON(w, map[string]any{"errcode": 40001, "errmsg": "invalid credential"})
		return
	}
	a.mu.Lock()
	a.issued++
	a.token = fmt.Sprintf("token-%d-%d", a.issued, time.Now().UnixNano())
	out := map[string]any{"errcode": 0, "errmsg": "ok", "access_token": a.token, "expires_in": a.expiresIn}
	a.mu.Unlock()
	writeJSON(w, out)
}

// decode reads a recorded body.
func decode[T any](raw json.RawMessage) T {
	var v T
	_ = json.Unmarshal(raw, &v)
	return v
}

// ReplicaClient is an HTTP client whose requests carry ReplicaHeader set
// to name, so that a fake records which replica made each call.
func ReplicaClient(name string) *http.Client {
	return &http.Client{Transport: replicaTransport{name: name}}
}

type replicaTransport struct{ name string }

func (t replicaTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(ReplicaHeader, t.name)
	return http.DefaultTransport.RoundTrip(r)
}
