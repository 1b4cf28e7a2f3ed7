package agent

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/jsonstring"
	"github.com/parleyhq/parley/retry"
	openai "github.com/sashabaranov/go-openai"
)

// ModelConfig is one further model an Agent may use besides its own
// (Config.Model with the Client given to New), for fallbacks and for
// turns whose policy names it.
type ModelConfig struct {
	// Key names the model in the configuration, metrics and logs
	// (models.KEY); Name is the model sent in its requests.
	Key  string
	Name string
	// Client sends its requests: one per model, each with its own pool.
	Client *Client
	// Vision marks a model that accepts images.
	Vision bool
	// Timeout bounds each attempt; zero: Config.Timeout.
	Timeout time.Duration
	// MaxRetries is its own retry budget: retries after the first
	// attempt, 0 never retries.
	MaxRetries int
	// Fallbacks are the keys of the models tried after it, in order:
	// the whole chain (see Endpoint.Fallbacks).
	Fallbacks []string
}

// endpoint is one model as the Agent sends to it: its client, its retry
// budget, and the chain of models a turn moves along when it fails.
type endpoint struct {
	key      string
	keyToken []byte // key as a JSON string, to match a stored ReasoningModel
	name     string
	model    []byte // name as a JSON string, for the request
	client   *Client
	retrier  *retry.Retrier
	timeout  time.Duration
	vision   bool
	// chain is this model followed by its fallbacks.
	chain []*endpoint
	// noStream is set once the model has shown that it does not stream
	// (see attempt); it stays set for the agent's life.
	noStream atomic.Bool
}

// addEndpoint registers one model under its key with a retrier of its own,
// so that one model's retries never spend another's budget.
func (a *Agent) addEndpoint(key, name string, client *Client, timeout time.Duration, retries int, vision bool) *endpoint {
	if timeout <= 0 {
		timeout = a.cfg.Timeout
	}
	ep := &endpoint{key: key, keyToken: jsonstring.Append(nil, key), name: name, model: jsonstring.Append(nil, name), client: client, timeout: timeout, vision: vision}
	ep.retrier = retry.New(integrationModel, retry.Policy{
		Attempts: 1 + max(retries, 0),
		MinWait:  a.cfg.BackoffBase, MaxWait: a.cfg.BackoffMax,
		// Retry-After is capped by the transport (maxRetryAfter), never refused.
		MaxRetryAfter: maxRetryAfter,
		Sleep:         a.cfg.Sleep,
		Observe:       func(at retry.Attempted) { a.observeAttempt(key, at) },
	}, a.m, a.log)
	a.models[key] = ep
	return ep
}

// linkChains builds each model's chain once every model is known. A
// fallback that names no model is skipped (configuration validation
// refuses it before an Agent is built).
func (a *Agent) linkChains(fallbacks map[string][]string) {
	for key, ep := range a.models {
		ep.chain = []*endpoint{ep}
		for _, f := range fallbacks[key] {
			if next, ok := a.models[f]; ok && next != ep {
				ep.chain = append(ep.chain, next)
			} else {
				a.log.Warn("a fallback names no model; skipped", "model", key, "fallback", f)
			}
		}
	}
}

// chainFor is the chain of the model key; the default model's when key
// is empty or names no model.
func (a *Agent) chainFor(ctx context.Context, key string) []*endpoint {
	if key == "" {
		return a.primary.chain
	}
	if ep, ok := a.models[key]; ok {
		return ep.chain
	}
	a.log.WarnContext(ctx, "a turn names an unknown model; the default model answers", "model", key)
	return a.primary.chain
}

// HasVision reports whether the model key (empty: the default model)
// accepts images.
func (a *Agent) HasVision(key string) bool {
	return a.chainFor(context.Background(), key)[0].vision
}

// ask sends one request of a turn along chain from *pos: the model at *pos
// with its retries, and on its failure the next model, and so on. *pos is
// left at the model that answered, so that the turn's later requests go
// straight to it rather than to a model that has just failed. build writes
// the request for a model into a pooled buffer (see turnRequest).
//
// Every failure moves on, a refusal (401, 404, …) included: a turn is
// better answered by a fallback than refused because of one model's bad
// key, but the refusal is logged as the misconfiguration it is. Only the
// turn's own end (the caller leaving, the turn deadline) stops the chain.
func (a *Agent) ask(ctx context.Context, log *slog.Logger, channel string, chain []*endpoint, pos *int, build func(*endpoint) *[]byte, usage *Usage, ev *emitter) (openai.ChatCompletionMessage, openai.FinishReason, error) {
	for {
		ep := chain[*pos]
		body := build(ep)
		answer, finish, err := a.complete(ctx, ep, channel, *body, usage, ev)
		bodyPool.Put(body)
		if err == nil || *pos+1 >= len(chain) || ctx.Err() != nil {
			return answer, finish, err
		}
		next := chain[*pos+1]
		a.m.LLMFallbacks.WithLabelValues(ep.key, next.key).Inc()
		if Classify(err) == Misconfigured {
			log.ErrorContext(ctx, "the model refused the bot's configuration (check its api_key, name and base_url); the turn falls back to the next model",
				"model", ep.key, "fallback", next.key, "err", err)
		} else {
			log.WarnContext(ctx, "the model is down; the turn falls back to the next model", "model", ep.key, "fallback", next.key, "err", err)
		}
		*pos++
	}
}
