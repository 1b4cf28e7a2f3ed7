package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// Feishu in the calls series: parley serves a Feishu app in webhook mode
// beside Slack, against feishutest's fake Open API (the tenant token, the
// bot's identity, replies, reactions, CardKit cards streamed to, message
// edits and the history), behind a proxy that counts every Open API call
// by method and path. Each message is an encrypted and signed
// im.message.receive_v1 callback mentioning the bot in a group chat of
// its own; its answer is complete when the fake shows its text whole and
// no card of it is still streaming.

// Credentials the fake Feishu accepts and the bench signs with (made up).
const (
	feishuAppID      = "cli_bench"
	feishuAppSecret  = "parley-bench-feishu-secret"
	feishuVerify     = "parley-bench-feishu-token"
	feishuEncryptKey = "parley-bench-feishu-encrypt-key"
)

// feishuEnv is parley's environment for the fake Feishu at base.
func feishuEnv(base string) []string {
	return []string{"FEISHU_APP_ID=" + feishuAppID, "FEISHU_APP_SECRET=" + feishuAppSecret, "FEISHU_BASE_URL=" + base,
		"FEISHU_MODE=webhook", "FEISHU_VERIFICATION_TOKEN=" + feishuVerify, "FEISHU_ENCRYPT_KEY=" + feishuEncryptKey}
}

// feishuOp names an Open API call by its method and path, ids left out:
// "POST im/v1/messages/:id/reply".
func feishuOp(method, path string) string {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(path, "/open-apis"), "/"), "/")
	for i, s := range segs {
		if i > 0 && isFeishuID(s) {
			segs[i] = ":id"
		}
	}
	return method + " " + strings.Join(segs, "/")
}

// isFeishuID reports whether a path segment is an id (om_…, oc_…, a card
// or reaction id, anything with a digit) rather than a name in the API's
// path.
func isFeishuID(s string) bool {
	if strings.ContainsAny(s, "0123456789") {
		return !(len(s) == 2 && s[0] == 'v') // v1, v3: the API's version
	}
	return strings.HasPrefix(s, "om_") || strings.HasPrefix(s, "oc_") || strings.HasPrefix(s, "ou_")
}

// feishuReading says whether an op reads (the history, names, the bot's
// identity) rather than shows the answer.
func feishuReading(op string) bool { return strings.HasPrefix(op, "GET ") }

// feishuCounter is the proxy in front of the fake Feishu.
type feishuCounter struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	ops   map[string]int64
}

func newFeishuCounter(target string) (*feishuCounter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	return &feishuCounter{proxy: httputil.NewSingleHostReverseProxy(u), ops: map[string]int64{}}, nil
}

func (c *feishuCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := feishuOp(r.Method, r.URL.Path)
	c.mu.Lock()
	c.ops[op]++
	c.mu.Unlock()
	c.proxy.ServeHTTP(w, r)
}

func (c *feishuCounter) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ops)
}

// cleanups is the testing.TB feishutest.New takes, outside a test: it
// only keeps the cleanups, run by done.
type cleanups struct {
	testing.TB
	fs []func()
}

func (c *cleanups) Cleanup(f func()) { c.fs = append(c.fs, f) }
func (c *cleanups) Helper()          {}
func (c *cleanups) done() {
	for i := len(c.fs) - 1; i >= 0; i-- {
		c.fs[i]()
	}
}

// feishuEvent is message id's callback body and its chat: a mention of
// the bot in a group chat of its own.
func feishuEvent(id, user int) []byte {
	ev := feishutest.Event(feishutest.Message{
		Token: feishuVerify, MessageID: fmt.Sprintf("om_bench%06d", id), ChatID: fmt.Sprintf("oc_bench%06d", id),
		ChatType: "group", Sender: fmt.Sprintf("ou_bench%d", user), Content: feishutest.Text("@_user_1 " + marker(id)),
		Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}},
	})
	return feishutest.Encrypted(ev, feishuEncryptKey)
}

// postFeishu delivers one callback, signed as Feishu signs it.
func postFeishu(ctx context.Context, client *http.Client, url string, body []byte) error {
	req := feishutest.Request(url, body, feishuEncryptKey, time.Now()).WithContext(ctx)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: feishu callback answered %s", resp.Status)
	}
	return nil
}

// feishuAnswers watches the fake Feishu for the answers to bench
// messages: each waiter gets the time its answer was first seen
// complete (whole, per complete, and no longer streaming).
type feishuAnswers struct {
	fk       *feishutest.Server
	complete func(string) bool
	mu       sync.Mutex
	waiters  map[int]chan time.Time
	seen     map[int]int // answers seen complete, by message
	stop     chan struct{}
	done     chan struct{}
}

func watchFeishu(fk *feishutest.Server, complete func(string) bool) *feishuAnswers {
	a := &feishuAnswers{fk: fk, complete: complete, waiters: map[int]chan time.Time{}, seen: map[int]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *feishuAnswers) expect(id int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	a.mu.Lock()
	a.waiters[id] = ch
	a.mu.Unlock()
	return ch
}

func (a *feishuAnswers) loop() {
	defer close(a.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			seen := map[int]int{}
			for _, v := range a.fk.Visible() {
				if v.Streaming || !strings.HasPrefix(v.Text, "echo:") || !a.complete(v.Text) {
					continue
				}
				if id, ok := parseMarker(v.Text); ok {
					seen[id]++
				}
			}
			a.mu.Lock()
			for id, n := range seen {
				if ch, ok := a.waiters[id]; ok {
					delete(a.waiters, id)
					ch <- now
				}
				a.seen[id] = max(a.seen[id], n)
			}
			a.mu.Unlock()
		}
	}
}

func (a *feishuAnswers) close() { close(a.stop); <-a.done }

// lostDoubled counts messages 0…n-1 never answered, or answered twice.
func (a *feishuAnswers) lostDoubled(n int) (lost, doubled int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range n {
		switch {
		case a.seen[id] == 0:
			lost++
		case a.seen[id] > 1:
			doubled++
		}
	}
	return lost, doubled
}

// runFeishuCalls sends o.Calls Feishu messages answered by model and
// counts the Open API calls while they are answered; complete says when
// an answer's text is whole.
func runFeishuCalls(ctx context.Context, o Options, name string, model http.Handler, complete func(string) bool) (CallsResult, error) {
	n := o.Calls
	o.Messages = n
	res := CallsResult{Model: name, Messages: n}
	tb := &cleanups{}
	defer tb.done()
	fk := feishutest.New(tb)
	fc, err := newFeishuCounter(fk.URL)
	if err != nil {
		return res, err
	}
	up, err := startUpstream(fc)
	if err != nil {
		return res, err
	}
	defer up.Close()
	rg, err := startRig(ctx, o, "parley-bench-feishu-", model, "", feishuEnv(up.URL())...)
	if err != nil {
		return res, err
	}
	defer rg.stop()
	watch := watchFeishu(fk, complete)
	defer watch.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callsSenders}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	one := func(id int) (time.Duration, error) {
		wait := watch.expect(id)
		t0 := time.Now()
		if err := postFeishu(ctx, client, rg.p.base+"/feishu/events", feishuEvent(id, id%max(o.Users, 1))); err != nil {
			return 0, err
		}
		select {
		case at := <-wait:
			return at.Sub(t0), nil
		case <-time.After(o.Timeout):
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	// Warm-up: the tenant token and the bot's identity are fetched, and
	// the connections opened, before the count.
	if d, err := one(n); err != nil {
		return res, fmt.Errorf("bench: feishu warm-up: %w", err)
	} else if d == 0 {
		return res, fmt.Errorf("bench: feishu warm-up message not answered (parley's log: %s)", rg.p.log)
	}
	time.Sleep(time.Second)
	before := fc.counts()
	e2e, err := sendAll(n, one)
	res.E2E = e2e
	if err != nil {
		return res, err
	}
	time.Sleep(time.Second)
	res.PerAnswer = perAnswer(before, fc.counts(), n)
	res.Lost, res.Doubled = watch.lostDoubled(n)
	return res, nil
}
