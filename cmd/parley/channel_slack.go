package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/channels"
	slackch "github.com/parleyhq/parley/channels/slack"
)

// slackChannels returns the Slack adapters the configuration enables: none
// without Slack credentials; otherwise one adapter that serves the Events
// API and slash commands over HTTP when a signing secret is set and holds
// a Socket Mode connection when an app token is set.
func (a *app) slackChannels() ([]channels.Channel, error) {
	c := a.cfg.Slack
	if c.BotToken == "" && c.SigningSecret == "" && c.AppToken == "" {
		return nil, nil
	}
	if c.BotToken == "" {
		return nil, errors.New("slack: SLACK_BOT_TOKEN is not set; the Slack channel needs the bot token (xoxb-…) to answer")
	}
	if c.SigningSecret == "" && c.AppToken == "" {
		return nil, errors.New("slack: SLACK_BOT_TOKEN is set, but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (Events API at /slack/events) is, so Slack cannot reach Parley")
	}
	ch, err := slackch.New(slackch.Config{
		BotToken:      c.BotToken,
		SigningSecret: c.SigningSecret,
		AppToken:      c.AppToken,
		APIURL:        c.APIURL,
		FollowThreads: c.FollowThreads,
		Command:       c.Command,
		Handler:       a.gateway,
		// The store's client is the shared Redis, or the embedded one of a
		// single replica: either way, every replica sees the same threads.
		Threads: slackch.NewRedisThreads(a.store.Client(), a.cfg.Redis.Prefix, a.cfg.Sessions.HistoryTTL),
		Metrics: a.metrics,
		Log:     a.log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ch.Identify(ctx); err != nil {
		if slackch.IsAuthError(err) {
			return nil, fmt.Errorf("%w (check SLACK_BOT_TOKEN)", err)
		}
		// Slack unreachable at start-up is not a configuration error: Run
		// keeps trying, and events name the bot meanwhile.
		a.log.Warn("slack: auth.test failed at start-up; retrying in the background", "err", err)
	}
	transports := []string{}
	if c.SigningSecret != "" {
		transports = append(transports, "events API at "+slackch.EventsPath+", slash commands at "+slackch.CommandsPath)
	}
	if c.AppToken != "" {
		transports = append(transports, "socket mode")
	}
	a.log.Info("slack: configured", "transports", transports, "follow_threads", c.FollowThreads, "command", c.Command)
	return []channels.Channel{ch}, nil
}
