package slack

import (
	"context"
	"encoding/json"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// runSocket holds a Socket Mode connection until ctx ends. slack-go's
// client reconnects by itself (after a disconnect envelope, a dead
// connection, a failed dial); when it gives up (a refused token, Slack
// unreachable for long) a new client is started after a growing wait.
func (a *Adapter) runSocket(ctx context.Context, h channels.Handler) {
	wait := a.cfg.ReconnectWait
	for {
		start := time.Now()
		err := a.socketSession(ctx, h)
		a.setConnected(false, err)
		if ctx.Err() != nil {
			return
		}
		a.countAPIError(err)
		if time.Since(start) > 5*time.Minute {
			wait = a.cfg.ReconnectWait // it ran for a while: not a crash loop
		}
		a.log.Error("slack: socket mode stopped; starting again", "err", err, "retry_in", wait)
		if !retry.Sleep(ctx, wait) {
			return
		}
		wait = min(wait*2, time.Minute)
	}
}

// socketSession runs one socketmode client and handles its events in this
// goroutine until the client returns.
func (a *Adapter) socketSession(ctx context.Context, h channels.Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sm := socketmode.New(a.api)
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case evt := <-sm.Events:
			a.socketEvent(ctx, sm, h, evt)
		}
	}
}

func (a *Adapter) socketEvent(ctx context.Context, sm *socketmode.Client, h channels.Handler, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		a.setConnected(false, nil)
	case socketmode.EventTypeConnectionError:
		var err error
		if e, ok := evt.Data.(*slackapi.ConnectionErrorEvent); ok {
			err = e.ErrorObj
			a.countAPIError(err)
		}
		a.setConnected(false, err)
		a.log.Warn("slack: socket mode connection failed; retrying", "err", err)
	case socketmode.EventTypeInvalidAuth:
		a.setConnected(false, nil)
		a.log.Error("slack: socket mode refused the app token (SLACK_APP_TOKEN)")
	case socketmode.EventTypeConnected:
		a.setConnected(true, nil)
		if a.connects.Add(1) > 1 {
			a.m.ChannelReconnects.WithLabelValues(Name).Inc()
			a.log.Info("slack: socket mode reconnected")
		} else {
			a.log.Info("slack: socket mode connected")
		}
	case socketmode.EventTypeEventsAPI:
		if evt.Request == nil {
			return
		}
		var env envelope
		if err := json.Unmarshal(evt.Request.Payload, &env); err != nil {
			a.log.Warn("slack: undecodable events_api envelope", "err", err)
			a.ack(ctx, sm, evt.Request.EnvelopeID, nil)
			return
		}
		if env.EventID == "" {
			env.EventID = "env:" + evt.Request.EnvelopeID
		}
		subCtx, cancel := context.WithTimeout(ctx, submitTimeout)
		defer cancel()
		m, ok, why := a.message(subCtx, env)
		if !ok {
			a.log.Debug("slack: event ignored", "event_id", env.EventID, "why", why)
			a.ack(ctx, sm, evt.Request.EnvelopeID, nil)
			return
		}
		if err := h.Submit(subCtx, m); err != nil {
			// Not acked: Slack delivers the event again.
			a.log.Error("slack: could not hand over an event", "event_id", env.EventID, "err", err)
			return
		}
		a.ack(ctx, sm, evt.Request.EnvelopeID, nil)
	case socketmode.EventTypeSlashCommand:
		c, ok := evt.Data.(slackapi.SlashCommand)
		if !ok || evt.Request == nil {
			return
		}
		subCtx, cancel := context.WithTimeout(ctx, submitTimeout)
		defer cancel()
		var payload any
		if text := a.command(subCtx, c, h); text != "" {
			payload = map[string]string{"response_type": slackapi.ResponseTypeEphemeral, "text": text}
		}
		a.ack(ctx, sm, evt.Request.EnvelopeID, payload)
	case socketmode.EventTypeInteractive:
		if evt.Request != nil {
			a.ack(ctx, sm, evt.Request.EnvelopeID, nil)
		}
	case socketmode.EventTypeErrorBadMessage:
		// An event slack-go cannot parse (an event type it does not know):
		// ack it anyway, or Slack keeps sending it.
		if e, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			var req struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if json.Unmarshal(e.Message, &req) == nil && req.EnvelopeID != "" {
				a.ack(ctx, sm, req.EnvelopeID, nil)
			}
			a.log.Debug("slack: socket mode message not understood", "err", e.Cause)
		}
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("slack: socket mode read or write failed", "event", string(evt.Type))
	}
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, envelopeID string, payload any) {
	if envelopeID == "" {
		return
	}
	if err := sm.AckCtx(ctx, envelopeID, payload); err != nil && ctx.Err() == nil {
		a.log.Warn("slack: could not ack an envelope", "err", err)
	}
}

func (a *Adapter) setConnected(up bool, err error) {
	a.connected.Store(up)
	v := 0.0
	if up {
		v = 1
	}
	a.m.ChannelConnected.WithLabelValues(Name).Set(v)
	if up {
		a.connErr.Store(nil)
	} else if err != nil {
		s := err.Error()
		a.connErr.Store(&s)
	}
}
