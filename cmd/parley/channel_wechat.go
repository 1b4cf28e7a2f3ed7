package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat"
	"github.com/parleyhq/parley/config"
	"github.com/redis/go-redis/v9"
)

// wechatState is where iLink logins and cursors live: Redis under the
// configured prefix when Redis is configured, else $PARLEY_HOME/wechat.json.
func wechatState(cfg config.Config, client redis.UniversalClient) wechat.State {
	if cfg.Redis.URL != "" && client != nil {
		return wechat.NewRedisState(client, cfg.Redis.Prefix)
	}
	return wechat.NewFileState(cfg.Home)
}

// wechatChannels returns the WeChat adapter when an iLink account is
// logged in (`parley wechat login`) or a WeCom AI bot is configured.
func (a *app) wechatChannels() ([]channels.Channel, error) {
	w := a.cfg.WeChat
	var sharedClient redis.UniversalClient
	if a.shared {
		sharedClient = a.store.Client()
	}
	state := wechatState(a.cfg, sharedClient)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accounts, err := state.Accounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("wechat: %w", err)
	}
	wecom := w.WeComBotID != "" || w.WeComSecret != ""
	if len(accounts) == 0 && !wecom {
		return nil, nil
	}
	if wecom && (w.WeComBotID == "" || w.WeComSecret == "") {
		return nil, fmt.Errorf("wechat: set both WECOM_BOT_ID and WECOM_BOT_SECRET (or neither)")
	}
	cfg := wechat.Config{
		// Leases, context tokens and the WeCom reply queue: the shared
		// Redis, or the embedded one of a single in-memory replica.
		Client:       a.store.Client(),
		Prefix:       a.cfg.Redis.Prefix,
		ILinkBaseURL: w.ILinkBaseURL,
		WeComBotID:   w.WeComBotID,
		WeComSecret:  w.WeComSecret,
		WeComWSURL:   w.WeComWSURL,
		ChunkChars:   w.ChunkChars,
		HTTP:         &http.Client{},
		Metrics:      a.metrics,
		Log:          a.log,
	}
	if len(accounts) > 0 {
		cfg.State = state
	}
	for _, acct := range accounts {
		if acct.Expired {
			a.log.Warn("wechat: the iLink session of this bot expired; run `parley wechat login` to log in again", "bot", acct.BotID)
		}
	}
	ch, err := wechat.New(cfg)
	if err != nil {
		return nil, err
	}
	return []channels.Channel{ch}, nil
}
