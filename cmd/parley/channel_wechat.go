package main

import "github.com/parleyhq/parley/channels"

// wechatChannels returns the Wechat adapters the configuration enables.
func (a *app) wechatChannels() ([]channels.Channel, error) {
	return nil, nil
}
