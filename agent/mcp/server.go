package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/retry"
)

// Bounds on one tools/list: a server that pages forever, or lists
// thousands of tools, must not stall a refresh or swell every request.
const (
	maxListPages = 32
	maxTools     = 256
)

// errStopped is the state of a server after Close.
var errStopped = errors.New("stopped")

// server supervises one configured MCP server: it connects, lists the
// tools into the registry, reconnects with backoff when the connection or
// the process ends, and marks the tools unavailable while it is down.
type server struct {
	name    string
	cfg     ServerConfig
	m       *Manager
	log     *slog.Logger
	secrets *redactor
	client  *sdk.Client
	refresh chan struct{} // a tools/list_changed arrived

	inflight inflight     // calls in flight, by progress token
	oauth    *oauthClient // nil without an oauth: section

	up atomic.Bool // read on every request, by each tool's Available

	// calls is held for reading by every call in flight. Teardown takes it
	// after marking the server down, so that calls (cancelled by Close, or
	// failed with the connection) have returned, and their
	// notifications/cancelled left, before the session closes.
	calls sync.RWMutex

	mu       sync.Mutex
	session  *sdk.ClientSession // nil while down
	err      string
	since    time.Time
	connects int
	tools    map[string]*tool // by offered name
	skipped  []SkippedTool
}

func newServer(m *Manager, name string, cfg ServerConfig) *server {
	s := &server{
		name:    name,
		cfg:     cfg,
		m:       m,
		secrets: &redactor{},
		refresh: make(chan struct{}, 1),
		err:     "not connected yet",
		tools:   map[string]*tool{},
	}
	s.log = slog.New(redactHandler{inner: m.log.Handler(), r: s.secrets}).With("server", name)
	if cfg.OAuth != nil && cfg.Transport() == TransportHTTP {
		s.oauth = &oauthClient{server: name, cfg: cfg.OAuth, store: m.tokens, http: newOAuthHTTPClient(), log: s.log, signIn: m.signIn, redact: s.secrets.add}
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "parley", Version: m.version}, &sdk.ClientOptions{
		Logger: s.log,
		// Parley serves no roots or sampling: it advertises nothing it
		// would not answer. It answers elicitation always: with the
		// Manager's Elicitor, or by declining.
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{
			Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{},
		}},
		ElicitationHandler:          s.elicit,
		ProgressNotificationHandler: s.progress,
		LoggingMessageHandler:       s.serverLog,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			// Coalesced: the supervisor re-lists once however many arrive.
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
	})
	return s
}

// run keeps the server connected until ctx ends, on the one reconnect
// loop. ready is called once an attempt has connected or timing.starts
// attempts have failed.
func (s *server) run(ctx context.Context, ready func()) {
	defer ready()
	defer s.setDown(errStopped)
	t := s.m.timing
	failures := 0
	retry.Reconnect{
		Integration: Integration, What: "mcp: server", Lost: "mcp: server down, reconnecting",
		Backoff: t.backoff, Metrics: s.m.metrics, Log: s.log, Sleep: s.pause,
	}.Run(ctx, func(ctx context.Context) (bool, error) {
		started := time.Now()
		err := s.serve(ctx, ready)
		if failures++; ctx.Err() == nil && failures >= t.starts {
			ready()
		}
		// Only a server that stayed up a while starts short again: one
		// that connects and then crashes at once must not restart every
		// second forever.
		return time.Since(started) >= t.stable, err
	})
}

// pause is the wait between connection attempts: the backoff, cut short
// when the server waits for a sign-in and one is saved, looked for every
// timing.signInPoll. The backoff of a server that waited for its sign-in
// for a while has grown to tools.mcp.retry.max (a minute by default):
// after one `parley mcp login`, every replica uses the sign-in within
// seconds, not at its next try. Like retry.Sleep it reports whether ctx
// is still alive.
func (s *server) pause(ctx context.Context, d time.Duration) bool {
	t := s.m.timing
	if s.oauth == nil || t.signInPoll <= 0 {
		return t.sleep(ctx, d)
	}
	for d > 0 {
		step := min(d, t.signInPoll)
		if !t.sleep(ctx, step) {
			return false
		}
		d -= step
		if s.oauth.signInSaved(ctx) {
			s.log.Info("mcp: a sign-in was saved; connecting")
			break
		}
	}
	return ctx.Err() == nil
}

// link is one connection attempt's transport, with what ends it.
type link struct {
	transport sdk.Transport
	// stop ends the transport: the stdio process, or the idle HTTP
	// connections. It is idempotent.
	stop func()
	// exited is closed when a stdio process exits; nil for HTTP.
	exited <-chan struct{}
	// exitErr says how the process ended when Parley did not end it; call
	// it after stop. Nil for HTTP.
	exitErr func() error
}

func (s *server) dial() (*link, error) {
	if s.cfg.Transport() == TransportStdio {
		p, err := startProcess(s.cfg, s.m.getenv, s.secrets.remember, s.m.timing.grace, s.log)
		if err != nil {
			return nil, err
		}
		return &link{transport: p.transport(), stop: p.stop, exited: p.exited, exitErr: p.exitError}, nil
	}
	t, stop, err := httpLink(s)
	if err != nil {
		return nil, err
	}
	return &link{transport: t, stop: stop}, nil
}

// serve makes one connection and keeps it until it ends, returning why.
// The tools are marked unavailable before the connection is torn down.
func (s *server) serve(ctx context.Context, ready func()) (err error) {
	l, err := s.dial()
	if err != nil {
		s.setDown(err)
		return err
	}
	defer l.stop()
	connectCtx, cancel := context.WithTimeout(ctx, s.m.timing.connect)
	defer cancel()
	sess, err := s.client.Connect(connectCtx, l.transport, nil)
	if err != nil {
		err = s.lost("connecting", err, l)
		s.setDown(err)
		return err
	}
	defer sess.Close()
	// Runs first: down before the session and the process go away, and
	// no call left on the session.
	defer func() {
		s.setDown(err)
		s.calls.Lock()
		s.calls.Unlock()
	}()

	if err := s.list(connectCtx, sess); err != nil {
		return s.lost("listing tools", err, l)
	}
	s.askForLogs(connectCtx, sess)
	cancel()
	s.setUp(sess)
	ready()

	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return errStopped
		case <-l.exited:
			// Stopping closes the pipes, which ends the session even when
			// something the server started still holds them.
			l.stop()
			return s.lost("connection lost", <-ended, l)
		case err := <-ended:
			return s.lost("connection lost", err, l)
		case <-s.refresh:
			listCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			if err := s.list(listCtx, sess); err != nil {
				s.log.Warn("mcp: tools/list after list_changed failed; keeping the previous list", "err", err)
			}
			cancel()
		}
	}
}

// lost ends the link and says why a step failed. A stdio process that died
// on its own explains more than the broken pipe that followed; a
// connection that just closed says less than an error.
func (s *server) lost(step string, err error, l *link) error {
	l.stop()
	if l.exitErr != nil {
		if exit := l.exitErr(); exit != nil {
			return exit
		}
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: closed by the server", step)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// askForLogs asks a server that has logs for those at info and above, when
// Parley's own log shows debug lines, where they go: servers send none
// until asked, and asking when they go nowhere would only cost traffic.
func (s *server) askForLogs(ctx context.Context, sess *sdk.ClientSession) {
	init := sess.InitializeResult()
	if init == nil || init.Capabilities == nil || init.Capabilities.Logging == nil || !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if err := sess.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		s.log.Debug("mcp: logging/setLevel refused", "err", err)
	}
}

// list fetches the server's tools and puts them into the registry. A
// server without the tools capability (resources or prompts only) offers
// none, and stays connected.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	if init := sess.InitializeResult(); init == nil || init.Capabilities == nil || init.Capabilities.Tools == nil {
		s.apply(nil, nil)
		return nil
	}
	var all []*sdk.Tool
	params := &sdk.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			s.log.Warn("mcp: tools/list has too many pages; using the tools listed so far", "pages", page)
			break
		}
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" || len(all) >= maxTools {
			break
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	if len(all) > maxTools {
		s.log.Warn("mcp: server lists too many tools; offering the first ones", "listed", len(all), "offered", maxTools)
		all = all[:maxTools]
	}
	s.apply(s.definitions(all))
	return nil
}

// definitions decides, for each listed tool, whether it is offered, under
// which name, with which schema and class.
func (s *server) definitions(list []*sdk.Tool) (map[string]*definition, []SkippedTool) {
	byName := map[string]*sdk.Tool{}
	var skipped []SkippedTool
	for _, t := range list {
		switch {
		case t == nil:
			continue
		case t.Name == "":
			skipped = append(skipped, SkippedTool{Reason: "the tool has no name"})
		case byName[t.Name] != nil:
			skipped = append(skipped, SkippedTool{Original: t.Name, Reason: "listed twice"})
		case offered(s.cfg.Tools, t.Name):
			byName[t.Name] = t
		}
	}
	names, dropped := offeredNames(s.name, slices.Collect(maps.Keys(byName)))
	for _, n := range dropped {
		skipped = append(skipped, SkippedTool{Original: n, Reason: "its name collides with another tool's once made a valid function name"})
	}
	defs := make(map[string]*definition, len(names))
	for original, name := range names {
		t := byName[original]
		params, err := schema(t.InputSchema)
		if err != nil {
			skipped = append(skipped, SkippedTool{Original: original, Reason: err.Error()})
			continue
		}
		cl := class(s.cfg, original, toolHint(t.Annotations))
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		defs[name] = &definition{
			original:    original,
			description: cutText(desc, maxDescription),
			params:      params,
			writes:      cl.writes,
			rule:        cl.rule,
			readClaimed: cl.readClaimed,
		}
	}
	slices.SortFunc(skipped, func(a, b SkippedTool) int { return strings.Compare(a.Original, b.Original) })
	for _, sk := range skipped {
		s.log.Warn("mcp: tool not offered", "tool", sk.Original, "reason", sk.Reason)
	}
	return defs, skipped
}

// apply makes the registry hold exactly defs for this server: tools that
// are gone are unregistered (a turn that holds one finds it unavailable),
// tools that changed are updated in place, new ones are registered.
func (s *server) apply(defs map[string]*definition, skipped []SkippedTool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reg := s.m.registry
	for name, t := range s.tools {
		if _, ok := defs[name]; !ok {
			t.removed.Store(true)
			reg.Unregister(name)
			delete(s.tools, name)
			// A server may rename its tools on every reconnect: the
			// series of the names it dropped would otherwise pile up.
			s.m.metrics.ForgetTools(name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		def := defs[name]
		if t, ok := s.tools[name]; ok {
			t.def.Store(def)
			continue
		}
		t := &tool{name: name, srv: s}
		t.def.Store(def)
		if err := reg.Register(t); err != nil {
			skipped = append(skipped, SkippedTool{Original: def.original, Reason: err.Error()})
			s.log.Warn("mcp: tool not offered", "tool", def.original, "reason", err)
			continue
		}
		s.tools[name] = t
	}
	s.skipped = skipped
	s.log.Info("mcp: tools listed", "offered", len(s.tools), "skipped", len(skipped))
}

// unregister removes every tool of the server from the registry (Close).
func (s *server) unregister() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.tools {
		t.removed.Store(true)
		s.m.registry.Unregister(name)
	}
	clear(s.tools)
}

func (s *server) isUp() bool { return s.up.Load() }

// current returns the session, or nil while the server is down.
func (s *server) current() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

func (s *server) setUp(sess *sdk.ClientSession) {
	s.mu.Lock()
	s.session, s.err, s.since = sess, "", time.Now()
	s.connects++
	connects := s.connects
	s.up.Store(true)
	s.mu.Unlock()
	if s.oauth != nil {
		s.oauth.connected()
	}
	attrs := []any{"transport", s.cfg.Transport(), "connects", connects}
	if init := sess.InitializeResult(); init != nil {
		attrs = append(attrs, "protocol", init.ProtocolVersion)
		if init.ServerInfo != nil {
			attrs = append(attrs, "server_name", init.ServerInfo.Name, "server_version", init.ServerInfo.Version)
		}
	}
	s.log.Info("mcp: server up", attrs...)
	s.changed()
}

// setDown marks the server down with err as the reason; it reports a
// change only when the server was up or the reason is new.
func (s *server) setDown(err error) {
	reason := s.secrets.string(err.Error())
	s.mu.Lock()
	wasUp := s.up.Swap(false)
	if !wasUp && s.err == reason {
		s.mu.Unlock()
		return
	}
	s.session, s.err = nil, reason
	if wasUp || s.since.IsZero() {
		s.since = time.Now()
	}
	s.mu.Unlock()
	s.changed()
}

// changed tells the Manager's observer. It runs on the server's own
// goroutine, so one server's states arrive in order.
func (s *server) changed() {
	if f := s.m.onState; f != nil {
		f(s.state())
	}
}

func (s *server) state() ServerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerState{
		Name:      s.name,
		Transport: s.cfg.Transport(),
		Up:        s.up.Load(),
		Err:       s.err,
		Since:     s.since,
		Connects:  s.connects,
		Skipped:   slices.Clone(s.skipped),
	}
	if s.oauth != nil && !st.Up {
		st.SignIn = s.oauth.signInNeeded()
	}
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		def := s.tools[name].def.Load()
		st.Tools = append(st.Tools, ToolState{Name: name, Original: def.original, Writes: def.writes, Rule: def.rule, ReadClaimed: def.readClaimed})
	}
	return st
}
