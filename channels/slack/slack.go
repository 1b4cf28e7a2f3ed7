// Package slack is the Slack channel: the Events API, slash commands and
// interactivity over HTTP (POST /slack/events, POST /slack/commands, POST
// /slack/interactions, signed with the app's signing secret) and Socket
// Mode (an outbound WebSocket opened with the app-level token). Either
// transport turns Slack events into channels.Message values for the
// gateway; replies go back with chat.postMessage into the thread they
// belong to. Approval prompts carry Approve and Deny buttons, and a click
// is submitted as the command it stands for (approval.go,
// interactions.go).
//
// Conversations: an app_mention starts or continues the conversation of
// its thread (thread_ts, or the message's own ts when it is top-level), and
// the bot answers in that thread. Once the bot has taken part in a thread,
// follow-ups there continue the conversation without a new mention
// (Config.FollowThreads; needs the channels:history/groups:history scopes
// and the message.channels/message.groups events). A DM is one conversation
// unless the user opens a thread in it. Slash commands (Config.Command) form
// a private conversation of their user in their channel and are answered
// ephemerally through their response_url.
//
// Dropped to avoid loops and noise: anything with a bot_id, any message
// subtype other than file_share and thread_broadcast (edits, deletes, bot
// messages, joins), the bot's own user, channel messages that mention the
// bot (their app_mention event carries them) and app_mentions in DMs (their
// message.im event carries them).
//
// Answers are shown while they are written (StartReply: Slack's native
// streaming in the thread, else one message edited as it grows, else the
// plain post; see stream.go), which chat:write covers.
//
// The Slack app needs the bot scopes app_mentions:read, chat:write,
// reactions:write, im:history and commands (plus channels:history,
// groups:history and mpim:history for thread following, and channels:read,
// groups:read and mpim:read to tell a mention in a group DM, which the
// access rules treat as a direct message), the bot events
// app_mention and message.im (plus message.channels, message.groups and
// message.mpim for thread following), and for Socket Mode an app-level
// token with connections:write. Reading the thread back before an answer
// (room.go) uses the same *:history scopes, and users:read for names.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	slackapi "github.com/slack-go/slack"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/logthrottle"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/retry"
)

// Name is the platform name in conversation keys and metrics.
const Name = "slack"

// MarkFollowed is the conversation mark of a thread the bot takes part
// in: set with every message the bot takes from the thread, and required
// of a follow-up without a mention. The gateway keeps it with the
// conversation, in the same step that accepts the message, for as long as
// the history lives: a thread whose history has expired is a stranger
// again, and every replica knows the same threads.
const MarkFollowed = "slack_followed"

// Meta keys of a Slack message, read back by Send and StartTyping.
const (
	MetaTS          = "ts"           // the message to react to
	MetaThreadTS    = "thread_ts"    // the thread to answer in ("" = top level)
	MetaResponseURL = "response_url" // a slash command's reply address
)

// Options are the parts of an Adapter that the file does not set: where
// it hands messages and keeps state, and the timings tests shorten. The
// zero value is ready to use.
type Options struct {
	// Handler receives messages from the HTTP routes. When nil, the
	// handler given to Run is used once Run has started.
	Handler channels.Handler
	// HTTPClient calls the Web API (default: an outbound client with a
	// pool of outbound.DefaultConns and a 30 s timeout).
	HTTPClient *http.Client
	// Now is the clock for signature timestamps (default time.Now).
	Now func() time.Time

	// MaxAttempts bounds the tries of one chat.postMessage (default 4).
	MaxAttempts int
	// RetryWait is the first wait between tries after a 5xx or network
	// error, doubling each time (default 1 s). A 429 waits Retry-After.
	RetryWait time.Duration
	// RetryMax is the longest wait between tries (default 8 × RetryWait).
	RetryMax time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a longer one fails
	// the send at once (default 30 s).
	MaxRetryAfter time.Duration
	// ReconnectWait is the first wait before reopening Socket Mode after
	// the client gave up, doubling up to a minute (default 1 s).
	ReconnectWait time.Duration
	// DMMatters reports whether the access rules tell a direct message
	// from a chat message in m's scope (channels.Deps.DMMatters). When it
	// is set and says no, a mention is not looked up with
	// conversations.info to learn whether it came from a group DM: the
	// webhook is acknowledged after one Redis script and nothing else.
	// Nil: every mention's channel is looked up (once per channel).
	DMMatters func(m channels.Message) bool

	// NoLiveReplies turns live replies off: every answer is posted when
	// complete, through the gateway's delivery (as for a workspace that
	// refuses both streaming and edits).
	NoLiveReplies bool
	// UpdateEvery is the least time between two edits of a live reply
	// shown as one edited message (default 1 s: Slack's pace for one
	// channel).
	UpdateEvery time.Duration
	// Redis, when set, holds the posting budget of each channel that every
	// replica and the gateway's outbox share (under Prefix): the first
	// message of a live reply takes its slot from it like any post, so
	// replies streamed by several replicas into one channel keep to
	// Slack's pace together. Nil: a live reply's first message is not
	// paced (one replica, or tests).
	Redis  redis.UniversalClient
	Prefix string
	// AppendEvery is the least time between two appends to a streamed
	// reply; text that comes sooner is sent with the next (default 1 s,
	// about the pace of Slack's own SDKs, which append every 256
	// characters).
	AppendEvery time.Duration
	// Account is the account (slack.accounts.NAME) the adapter serves,
	// "" for the section's own app: its messages carry it, its routes end
	// in /NAME, and it is the account label of its metrics.
	Account string
}

// Defaults of Options.
const (
	DefaultMaxAttempts   = 4
	DefaultRetryWait     = time.Second
	DefaultMaxRetryAfter = 30 * time.Second
	DefaultReconnectWait = time.Second
	maxReconnectWait     = time.Minute
	httpTimeout          = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = outbound.Client(outbound.Options{Timeout: httpTimeout})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryWait <= 0 {
		o.RetryWait = DefaultRetryWait
	}
	if o.RetryMax < o.RetryWait {
		o.RetryMax = 8 * o.RetryWait
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.ReconnectWait <= 0 {
		o.ReconnectWait = DefaultReconnectWait
	}
	if o.UpdateEvery <= 0 {
		o.UpdateEvery = DefaultUpdateEvery
	}
	if o.AppendEvery <= 0 {
		o.AppendEvery = DefaultAppendEvery
	}
	return o
}

// Adapter is the Slack channel.
type Adapter struct {
	cfg      Config
	opts     Options
	api      *slackapi.Client
	log      *slog.Logger
	m        *metrics.Metrics
	calls    *retry.Retrier // Web API calls
	identity *retry.Retrier // auth.test until it answers

	mu        sync.Mutex
	botUserID string // from auth.test
	botID     string
	handler   channels.Handler // from Run, when opts.Handler is nil

	groupDMs groupDMs   // channels known to be group DMs, or not
	room     *roomState // names and rate limits of room reads (room.go)
	// modes is how each workspace shows live replies, when it refused
	// the richer ways (absent: stream); noStatus the workspaces that
	// refused assistant.threads.setStatus. Kept in this process only,
	// each for RefusalMemory.
	modes    map[string]remembered[replyMode]
	noStatus map[string]remembered[bool]
	// refusals keeps refused requests from flooding the log.
	refusals *logthrottle.Throttle

	connected atomic.Bool
	connects  atomic.Int64 // connections of the current Socket Mode client
	connErr   atomic.Pointer[string]
	// refused is the code Slack refused the bot token with (token_revoked,
	// invalid_auth, …) until it signs in again: the account is down.
	refused    atomic.Pointer[string]
	identified atomic.Bool // auth.test has answered once
	// peers are the adapters of the deployment's other Slack accounts: a
	// follow-up that addresses one of their bots is theirs (accounts.go).
	peers []*Adapter
}

var (
	_ channels.Channel     = (*Adapter)(nil)
	_ channels.Runner      = (*Adapter)(nil)
	_ channels.Typing      = (*Adapter)(nil)
	_ channels.HTTPChannel = (*Adapter)(nil)
	_ channels.Health      = (*Adapter)(nil)
	_ channels.Poster      = (*Adapter)(nil)
	_ channels.Streamer    = (*Adapter)(nil)
)

// New returns an adapter for cfg; it makes no network call. m nil counts
// into a private registry; log nil discards.
func New(cfg Config, opts Options, m *metrics.Metrics, log *slog.Logger) (*Adapter, error) {
	if !cfg.BotToken.IsSet() {
		return nil, errors.New("slack: a bot token (SLACK_BOT_TOKEN) is required")
	}
	if err := cfg.validateAppToken(); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	if m == nil {
		m = metrics.New()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", Name)
	if opts.Account != "" {
		log = log.With("account", opts.Account)
	}
	calls := m.PlatformCalls
	opts.HTTPClient = outbound.Counted(opts.HTTPClient, func(r *http.Request) {
		calls.WithLabelValues(Name, callMethod(r)).Inc()
	})
	apiOpts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(opts.HTTPClient)}
	if cfg.AppToken.IsSet() {
		apiOpts = append(apiOpts, slackapi.OptionAppLevelToken(cfg.AppToken.Reveal()))
	}
	a := &Adapter{
		cfg: cfg, opts: opts, log: log, m: m,
		api: slackapi.New(cfg.BotToken.Reveal(), apiOpts...),
		calls: retry.New(Name, retry.Policy{
			Attempts: opts.MaxAttempts, MinWait: opts.RetryWait, MaxWait: opts.RetryMax,
			MaxRetryAfter: opts.MaxRetryAfter,
		}, m, log),
		identity: retry.New(Name, retry.Policy{MinWait: opts.ReconnectWait, MaxWait: maxReconnectWait}, m, log),
		refusals: logthrottle.New(logthrottle.DefaultEvery, opts.Now),
		room:     newRoomState(opts.Redis, opts.Prefix),
	}
	if cfg.AppToken.IsSet() && opts.Account == "" { // only a long connection has a connected state
		a.m.ChannelConnected.WithLabelValues(Name).Set(0)
	}
	a.m.AccountUp.WithLabelValues(Name, a.accountLabel()).Set(0) // until auth.test answers
	a.primeFallbacks()
	return a, nil
}

// Name implements channels.Channel.
func (a *Adapter) Name() string { return Name }

// Identify calls auth.test and remembers the bot's own user id, which is
// stripped from mentions and never answered. Run calls it until it
// succeeds; callers may call it first to fail fast on a bad token.
func (a *Adapter) Identify(ctx context.Context) error {
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		a.countAPIError(err)
		return fmt.Errorf("slack: auth.test: %w", retry.Mark(classify(err).reason, err))
	}
	a.mu.Lock()
	a.botUserID, a.botID = res.UserID, res.BotID
	a.mu.Unlock()
	a.signedIn(true)
	a.log.Info("signed in", "team", res.TeamID, "bot_user", res.UserID)
	return nil
}

// BotUserID is the bot's user id from auth.test ("" until known).
func (a *Adapter) BotUserID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botUserID
}

// IsAuthError reports whether err means the token itself was refused, so
// retrying cannot help.
func IsAuthError(err error) bool {
	var se slackapi.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	return authCodes[se.Err]
}

// authCodes are the errors Slack refuses a token itself with.
var authCodes = map[string]bool{
	"invalid_auth": true, "not_authed": true, "token_revoked": true, "token_expired": true,
	"account_inactive": true, "not_allowed_token_type": true,
}

// Ready implements channels.Health: the bot token must not have been
// refused (revoked, invalid) since the last sign-in, and with Socket Mode
// the connection must be up.
func (a *Adapter) Ready() error {
	if p := a.refused.Load(); p != nil {
		return fmt.Errorf("Slack refused the app's token (%s)", *p)
	}
	if !a.cfg.AppToken.IsSet() || a.connected.Load() {
		return nil
	}
	if p := a.connErr.Load(); p != nil {
		return fmt.Errorf("socket mode not connected: %s", *p)
	}
	return errors.New("socket mode not connected yet")
}

// Run implements channels.Runner. It signs in with auth.test (retrying
// until it succeeds) and, when an app token is configured, holds the
// Socket Mode connection, reconnecting as needed.
func (a *Adapter) Run(ctx context.Context, h channels.Handler) error {
	a.mu.Lock()
	a.handler = h
	a.mu.Unlock()
	if h == nil {
		h = a.opts.Handler
	}
	if a.cfg.AppToken.IsSet() && h == nil {
		return errors.New("slack: Run needs a handler")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if a.BotUserID() == "" {
		// Until auth.test answers, mentions of the bot are recognised from
		// each event's authorizations.
		wg.Go(func() {
			_ = retry.RetryUntil(ctx, a.identity, "auth.test", func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				return a.Identify(ctx)
			})
		})
	}
	if a.cfg.AppToken.IsSet() {
		a.runSocket(ctx, h)
	}
	<-ctx.Done()
	return nil
}

// httpHandler is the handler for webhook messages.
func (a *Adapter) httpHandler() channels.Handler {
	if a.opts.Handler != nil {
		return a.opts.Handler
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handler
}

// Address implements channels.Addresser: of a message the bot starts
// itself (a trigger's work, not an event) it fills in the thread to post
// in, and the mark by which the adapter follows that thread, so that
// people's replies there reach the bot as replies to any answer do.
func (a *Adapter) Address(m *channels.Message) {
	m.Marks = []string{MarkFollowed}
	if m.Thread != "" {
		if m.Meta == nil {
			m.Meta = map[string]string{}
		}
		m.Meta[MetaThreadTS] = m.Thread
	}
}
