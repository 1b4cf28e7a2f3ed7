package main

import "github.com/parleyhq/parley/channels"

// slackChannels returns the Slack adapters the configuration enables.
func (a *app) slackChannels() ([]channels.Channel, error) {
	return nil, nil
}
