package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/sessions"
	"github.com/redis/go-redis/v9"
)

const wechatUsage = "parley wechat login [--config FILE] [--account NAME] [--codes N] | status [--config FILE]"

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

// wechatStore opens the state store of the iLink logins of one account
// ("" for the section's own); close releases it. where describes it for
// the operator.
func (e *environment) wechatStore(cfg config.Config, account string) (state wechat.State, client redis.UniversalClient, where string, close func(), err error) {
	if cfg.Redis.URL == "" {
		fs := wechat.NewAccountFileState(cfg.Home, account)
		return fs, nil, fs.Path() + " (mode 0600; REDIS_URL is not set)", func() {}, nil
	}
	client, err = sessions.OpenRedis(e.ctx, cfg.Redis.URL.Reveal(), 0)
	if err != nil {
		return nil, nil, "", nil, err
	}
	prefix := wechat.StatePrefix(cfg.Redis.Prefix, account)
	return wechat.NewRedisState(client, prefix), client, fmt.Sprintf("Redis (key prefix %q)", prefix), func() { client.Close() }, nil
}

func (e *environment) wechatLogin(args []string) error {
	fs := newFlagSet("wechat login", e.stderr)
	path := configFlag(fs)
	codes := fs.Int("codes", 3, "how many QR codes to show before giving up (each lives about 5 minutes)")
	account := fs.String("account", "", "the account (wechat.accounts.NAME) the bot answers as; default: the section's own")
	cfg, err := e.parseAndLoad(fs, path, args)
	if err != nil {
		return err
	}
	section := wechat.FromConfig(cfg)
	acc, ok := section.ForAccount(*account)
	if !ok {
		return fmt.Errorf("%w: --account %s: unknown account (the wechat section configures %s)", errUsage, *account, strings.Join(section.AccountNames(), ", "))
	}
	if *account == channels.DefaultAccount {
		*account = ""
	}
	state, _, where, closeStore, err := e.wechatStore(cfg, *account)
	if err != nil {
		return err
	}
	defer closeStore()
	acct, err := wechat.Login(e.ctx, wechat.LoginOptions{
		BaseURL:  acc.ILinkBaseURL,
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
	if *account != "" {
		fmt.Fprintf(e.stdout, "Saved the login of bot %s for account %s in %s.\n", acct.BotID, *account, where)
	} else {
		fmt.Fprintf(e.stdout, "Saved the login of bot %s in %s.\n", acct.BotID, where)
	}
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
	section := wechat.FromConfig(cfg)
	for _, name := range section.AccountNames() {
		account := name
		if name == channels.DefaultAccount {
			account = ""
		}
		if len(section.Accounts) > 0 {
			fmt.Fprintf(e.stdout, "Account %s:\n", name)
		}
		acc, _ := section.ForAccount(name)
		if err := e.wechatAccountStatus(cfg, acc, account); err != nil {
			return err
		}
	}
	return nil
}

// wechatAccountStatus prints one account's iLink bots and WeCom AI bot.
func (e *environment) wechatAccountStatus(cfg config.Config, w wechat.Config, account string) error {
	state, client, where, closeStore, err := e.wechatStore(cfg, account)
	if err != nil {
		return err
	}
	defer closeStore()
	accounts, err := state.Accounts(e.ctx)
	if err != nil {
		return err
	}
	out := e.stdout
	login := "parley wechat login"
	if account != "" {
		login += " --account " + account
	}
	if len(accounts) == 0 {
		fmt.Fprintf(out, "Personal WeChat (iLink): no bot is logged in (state in %s). Run `%s`.\n", where, login)
	} else {
		fmt.Fprintf(out, "Personal WeChat (iLink) bots, state in %s:\n", where)
	}
	now := time.Now()
	for _, a := range accounts {
		printAccount(e.ctx, out, client, wechat.StatePrefix(cfg.Redis.Prefix, account), a, state, now, login)
	}
	switch {
	case w.WeComBotID != "" && account != "":
		fmt.Fprintf(out, "WeCom AI bot: %s over %s (secret %s); its connection shows in /readyz and parley_account_up{channel=\"wechat\",account=%q}.\n",
			w.WeComBotID, w.WeComWSURL, map[bool]string{true: "set", false: "MISSING: set wechat.accounts." + account + ".wecom_bot_secret"}[w.WeComSecret.IsSet()], account)
	case w.WeComBotID != "":
		fmt.Fprintf(out, "WeCom AI bot: %s over %s (secret %s); its connection shows in /readyz and parley_channel_connected{channel=\"wechat\"}.\n",
			w.WeComBotID, w.WeComWSURL, map[bool]string{true: "set", false: "MISSING: set WECOM_BOT_SECRET"}[w.WeComSecret.IsSet()])
	case account != "":
		fmt.Fprintf(out, "WeCom AI bot: not configured (wechat.accounts.%s.wecom_bot_id, wecom_bot_secret).\n", account)
	default:
		fmt.Fprintln(out, "WeCom AI bot: not configured (WECOM_BOT_ID, WECOM_BOT_SECRET).")
	}
	return nil
}

func printAccount(ctx context.Context, out io.Writer, client redis.UniversalClient, prefix string, a wechat.Account, state wechat.State, now time.Time, login string) {
	fmt.Fprintf(out, "\nbot %s\n", a.BotID)
	session := "active"
	if a.Expired {
		session = "EXPIRED (iLink answered errcode -14): run `" + login + "` again"
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
