package wxapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/retry"
)

// Account is one app or Official Account as its API client needs it.
type Account struct {
	// Channel is the platform name: the channel label of the metrics and
	// the integration of the retry loop.
	Channel string
	// ID names the account's token in Redis ("wechat_oa:wx123"); never a
	// secret.
	ID      string
	BaseURL string
	Codes   Codes
	// TokenOp, TokenPath and TokenQuery are the token endpoint; the query
	// carries the secret and is built only when a token is fetched.
	TokenOp    string
	TokenPath  string
	TokenQuery func() url.Values
}

// ClientOptions shape an account's client; zero fields take the defaults.
type ClientOptions struct {
	// HTTP makes the calls (default: a client with a 15 s timeout).
	HTTP *http.Client
	// Attempts, RetryMin and RetryMax shape the retries of a call
	// (defaults 3, 500 ms, 5 s).
	Attempts           int
	RetryMin, RetryMax time.Duration
	// Tokens shapes the shared access token.
	Tokens TokenOptions
}

// Defaults of ClientOptions.
const (
	DefaultAttempts = 3
	DefaultRetryMin = 500 * time.Millisecond
	DefaultRetryMax = 5 * time.Second
	httpTimeout     = 15 * time.Second
)

// DefaultRetry is the defaults of the retry: section of a platform whose
// calls go through a Client (wecom_app, wechat_official_account).
var DefaultRetry = retry.Config{MaxAttempts: DefaultAttempts, Base: DefaultRetryMin, Max: DefaultRetryMax}

// WithRetry returns o with its tries and waits set from a retry: section
// (its zero fields take DefaultRetry).
func (o ClientOptions) WithRetry(c retry.Config) ClientOptions {
	c = c.Or(DefaultRetry)
	o.Attempts, o.RetryMin, o.RetryMax = c.MaxAttempts, c.Base, c.Max
	return o
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.HTTP == nil {
		o.HTTP = outbound.Client(outbound.Options{Timeout: httpTimeout})
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	return o
}

// NewClient returns acct's client, its token shared through client under
// prefix. m and log must not be nil.
func NewClient(acct Account, o ClientOptions, client redis.UniversalClient, prefix string, m *metrics.Metrics, log *slog.Logger) *Client {
	o = o.withDefaults()
	c := &Client{
		Channel: acct.Channel, BaseURL: acct.BaseURL, HTTP: o.HTTP, Codes: acct.Codes, Metrics: m,
		Retrier: retry.New(acct.Channel, retry.Policy{Attempts: o.Attempts, MinWait: o.RetryMin, MaxWait: o.RetryMax}, m, log),
	}
	c.Tokens = NewTokens(client, prefix, acct.ID, c.FetchToken(acct.TokenOp, acct.TokenPath, acct.TokenQuery), o.Tokens, log)
	return c
}

// CheckBaseURL is the rule for a base_url key: an http(s) URL with a
// host.
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return nil
}
