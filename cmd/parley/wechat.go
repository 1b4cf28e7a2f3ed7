package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
	"github.com/redis/go-redis/v9"
)

const wechatUsage = "parley wechat login [--config FILE] [--codes N] | status [--config FILE]"

// wechat runs `parley wechat login|status`.
func (e *environment) wechat(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, wechatUsage)
	}
	switch args[0] {
	case "login":
		return e.wechatLogin(args[1:])
	case "status":
		return e.wechatStatus(args[1:])
	default:
		return fmt.Errorf("%w: unknown wechat command %q: %s", errUsage, args[0], wechatUsage)
	}
}

// wechatStore opens the state store of iLink logins; close releases it.
// where describes it for the operator.
func (e *environment) wechatStore(cfg config.Config) (state wechat.State, client redis.UniversalClient, where string, close func(), err error) {
	if cfg.Redis.URL == "" {
		fs := wechat.NewFileState(cfg.Home)
		return fs, nil, fs.Path() + " (mode 0600; REDIS_URL is not set)", func() {}, nil
	}
	client, err = sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
	if err != nil {
		return nil, nil, "", nil, err
	}
	return wechat.NewRedisState(client, cfg.Redis.Prefix), client, fmt.Sprintf("Redis (key prefix %q)", cfg.Redis.Prefix), func() { client.Close() }, nil
}

func (e *environment) wechatLogin(args []string) error {
	fs := newFlagSet("wechat login", e.stderr)
	path := configFlag(fs)
	codes := fs.Int("codes", 3, "how many QR codes to show before giving up (each lives about 5 minutes)")
	cfg, err := e.parseAndLoad(fs, path, args)
	if err != nil {
		return err
	}
	state, _, where, closeStore, err := e.wechatStore(cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	acct, err := wechat.Login(e.ctx, wechat.LoginOptions{
		BaseURL:  wechat.FromConfig(cfg).ILinkBaseURL,
		HTTP:     &http.Client{},
		Out:      e.stdout,
		In:       e.stdin,
		MaxCodes: *codes,
	})
	if err != nil {
		return err
	}
	if err := state.SaveAccount(e.ctx, acct); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Saved the login of bot %s in %s.\n", acct.BotID, where)
	fmt.Fprintln(e.stdout, "`parley serve` answers its messages from now on: a serve that already polls WeChat picks the login up within seconds; start or restart any other.")
	return nil
}

func (e *environment) wechatStatus(args []string) error {
	fs := newFlagSet("wechat status", e.stderr)
	path := configFlag(fs)
	cfg, err := e.parseAndLoad(fs, path, args)
	if err != nil {
		return err
	}
	state, client, where, closeStore, err := e.wechatStore(cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	accounts, err := state.Accounts(e.ctx)
	if err != nil {
		return err
	}
	out := e.stdout
	if len(accounts) == 0 {
		fmt.Fprintf(out, "Personal WeChat (iLink): no bot is logged in (state in %s). Run `parley wechat login`.\n", where)
	} else {
		fmt.Fprintf(out, "Personal WeChat (iLink) bots, state in %s:\n", where)
	}
	now := time.Now()
	for _, a := range accounts {
		printAccount(e.ctx, out, client, cfg.Redis.Prefix, a, state, now)
	}
	if w := wechat.FromConfig(cfg); w.WeComBotID != "" {
		fmt.Fprintf(out, "WeCom AI bot: %s over %s (secret %s); its connection shows in /readyz and parley_channel_connected{channel=\"wechat\"}.\n",
			w.WeComBotID, w.WeComWSURL, map[bool]string{true: "set", false: "MISSING: set WECOM_BOT_SECRET"}[w.WeComSecret.IsSet()])
	} else {
		fmt.Fprintln(out, "WeCom AI bot: not configured (WECOM_BOT_ID, WECOM_BOT_SECRET).")
	}
	return nil
}

func printAccount(ctx context.Context, out io.Writer, client redis.UniversalClient, prefix string, a wechat.Account, state wechat.State, now time.Time) {
	fmt.Fprintf(out, "\nbot %s\n", a.BotID)
	session := "active"
	if a.Expired {
		session = "EXPIRED (iLink answered errcode -14): run `parley wechat login` again"
	}
	fmt.Fprintf(out, "  session:     %s\n", session)
	if !a.LoggedIn.IsZero() {
		fmt.Fprintf(out, "  logged in:   %s (bot token age %s)\n", a.LoggedIn.Local().Format(time.RFC3339), ago(now.Sub(a.LoggedIn)))
	}
	if a.UserID != "" {
		fmt.Fprintf(out, "  owner:       %s\n", a.UserID)
	}
	fmt.Fprintf(out, "  base URL:    %s\n", a.BaseURL)
	if c, err := state.Cursor(ctx, a.BotID); err == nil {
		fmt.Fprintf(out, "  cursor:      %s\n", map[bool]string{true: "saved", false: "none yet (no batch received)"}[c != ""])
	}
	switch {
	case client == nil:
		fmt.Fprintln(out, "  context token: kept in the serving process (no REDIS_URL): not visible here")
	default:
		at, ok, err := wechat.NewestContextToken(ctx, client, prefix, a.BotID)
		switch {
		case err != nil:
			fmt.Fprintf(out, "  context token: unknown (%v)\n", err)
		case !ok:
			fmt.Fprintln(out, "  context token: none yet (no user has written)")
		default:
			fmt.Fprintf(out, "  context token: newest %s ago (replies are only possible shortly after a user writes)\n", ago(now.Sub(at)))
		}
	}
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
