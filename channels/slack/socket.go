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
// unreachable for long) retry.Reconnect starts a new client after a
// growing wait, short again once a client ran for healthySession.
func (a *Adapter) runSocket(ctx context.Context, h channels.Handler) {
	retry.Reconnect{
		Integration: Name, What: "socket mode",
		Backoff: retry.Backoff{Min: a.opts.ReconnectWait, Max: maxReconnectWait},
		Metrics: a.m, Log: a.log,
	}.Run(ctx, func(ctx context.Context) (bool, error) {
		start := time.Now()
		err := a.socketSession(ctx, h)
		a.setConnected(false, err)
		if ctx.Err() == nil {
			a.countAPIError(err)
		}
		return time.Since(start) > healthySession, err
	})
}

// healthySession is how long a Socket Mode client must have run for its
// end to count as a drop rather than a crash loop.
const healthySession = 5 * time.Minute

// socketSession runs one socketmode client and handles its events in this
// goroutine until the client returns.
func (a *Adapter) socketSession(ctx context.Context, h channels.Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.connects.Store(0)
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

// socketEvent handles one event of the Socket Mode client: a change of
// the connection, or an envelope to act on and ack.
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
		a.log.Warn("socket mode connection failed; retrying", "err", err)
	case socketmode.EventTypeInvalidAuth:
		a.setConnected(false, nil)
		a.log.Error("socket mode refused the app token (SLACK_APP_TOKEN)")
	case socketmode.EventTypeConnected:
		a.socketConnected()
	case socketmode.EventTypeEventsAPI:
		if evt.Request != nil {
			a.socketEventsAPI(ctx, sm, h, evt.Request)
		}
	case socketmode.EventTypeSlashCommand:
		c, ok := evt.Data.(slackapi.SlashCommand)
		if ok && evt.Request != nil {
			a.socketCommand(ctx, sm, h, evt.Request, c)
		}
	case socketmode.EventTypeInteractive:
		if evt.Request != nil {
			a.socketInteraction(ctx, sm, h, evt.Request) // interactions.go
		}
	case socketmode.EventTypeErrorBadMessage:
		if e, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			a.socketBadMessage(ctx, sm, e)
		}
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("socket mode read or write failed", "event", string(evt.Type))
	}
}

// socketConnected marks the adapter connected. A new client's first
// connection is counted by Reconnect; the ones the client makes by itself
// are counted here.
func (a *Adapter) socketConnected() {
	a.setConnected(true, nil)
	// A new client's first connection is counted by Reconnect; the ones
	// the client makes by itself are counted here.
	if a.connects.Add(1) > 1 {
		a.m.Reconnects.WithLabelValues(Name).Inc()
		a.log.Info("socket mode reconnected")
	} else {
		a.log.Info("socket mode connected")
	}
}

// socketEventsAPI submits an Events API envelope's message and acks it;
// one that could not be queued is not acked, so Slack delivers it again.
func (a *Adapter) socketEventsAPI(ctx context.Context, sm *socketmode.Client, h channels.Handler, req *socketmode.Request) {
	var env envelope
	if err := json.Unmarshal(req.Payload, &env); err != nil {
		a.log.Warn("undecodable events_api envelope", "err", err)
		a.ack(ctx, sm, req.EnvelopeID, nil)
		return
	}
	if env.EventID == "" {
		env.EventID = "env:" + req.EnvelopeID
	}
	subCtx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	m, ok, why := a.message(env)
	if !ok {
		a.log.Debug("event ignored", "event_id", env.EventID, "why", why)
		a.ack(ctx, sm, req.EnvelopeID, nil)
		return
	}
	if err := a.submit(subCtx, h, env.EventID, m); err != nil {
		return // not acked: Slack delivers the event again
	}
	a.ack(ctx, sm, req.EnvelopeID, nil)
}

// socketCommand runs a slash command and acks it with its answer, shown
// to the user alone.
func (a *Adapter) socketCommand(ctx context.Context, sm *socketmode.Client, h channels.Handler, req *socketmode.Request, c slackapi.SlashCommand) {
	subCtx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	var payload any
	if text := a.command(subCtx, c, h); text != "" {
		payload = map[string]string{"response_type": slackapi.ResponseTypeEphemeral, "text": text}
	}
	a.ack(ctx, sm, req.EnvelopeID, payload)
}

// socketBadMessage acks an event slack-go cannot parse (an event type it
// does not know) anyway, or Slack keeps sending it.
func (a *Adapter) socketBadMessage(ctx context.Context, sm *socketmode.Client, e *socketmode.ErrorBadMessage) {
	var req struct {
		EnvelopeID string `json:"envelope_id"`
	}
	if json.Unmarshal(e.Message, &req) == nil && req.EnvelopeID != "" {
		a.ack(ctx, sm, req.EnvelopeID, nil)
	}
	a.log.Debug("socket mode message not understood", "err", e.Cause)
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, envelopeID string, payload any) {
	if envelopeID == "" {
		return
	}
	if err := sm.AckCtx(ctx, envelopeID, payload); err != nil && ctx.Err() == nil {
		a.log.Warn("could not ack an envelope", "err", err)
	}
}

func (a *Adapter) setConnected(up bool, err error) {
	a.connected.Store(up)
	v := 0.0
	if up {
		v = 1
	}
	if a.opts.Account == "" {
		// parley_channel_connected is the platform's series, the default
		// app's; every account's connection shows in parley_account_up.
		a.m.ChannelConnected.WithLabelValues(Name).Set(v)
	}
	if up {
		a.connErr.Store(nil)
	} else if err != nil {
		s := err.Error()
		a.connErr.Store(&s)
	}
	a.showUp()
}
