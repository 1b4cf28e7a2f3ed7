package main

import "github.com/parleyhq/parley/channels"

// feishuChannels returns the Feishu adapters the configuration enables.
func (a *app) feishuChannels() ([]channels.Channel, error) {
	return nil, nil
}
