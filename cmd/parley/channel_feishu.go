package main

import (
	"errors"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu"
)

// feishuChannels returns the Feishu adapters the configuration enables:
// one, when the app's credentials are set. Its HTTP callback is mounted
// whenever it exists; its long connection runs unless feishu.mode is
// webhook.
func (a *app) feishuChannels() ([]channels.Channel, error) {
	fc := a.cfg.Feishu
	if fc.AppID == "" && fc.AppSecret == "" {
		return nil, nil
	}
	if fc.AppID == "" || fc.AppSecret == "" {
		return nil, errors.New("feishu: set both FEISHU_APP_ID and FEISHU_APP_SECRET (or neither)")
	}
	ch, err := feishu.New(feishu.Options{
		AppID:             fc.AppID,
		AppSecret:         fc.AppSecret,
		VerificationToken: fc.VerificationToken,
		EncryptKey:        fc.EncryptKey,
		BaseURL:           fc.BaseURL,
		Domain:            fc.Domain,
		Mode:              fc.Mode,
		ReplyInThread:     fc.ReplyInThread,
		FollowThreads:     fc.FollowThreads,
		Handler:           a.gateway,
		Redis:             a.store.Client(),
		Prefix:            a.cfg.Redis.Prefix,
		ThreadTTL:         a.cfg.Sessions.HistoryTTL,
		Metrics:           a.metrics,
		Log:               a.log,
	})
	if err != nil {
		return nil, err
	}
	return []channels.Channel{ch}, nil
}
