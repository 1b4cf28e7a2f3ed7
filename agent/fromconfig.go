package agent

import (
	"log/slog"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/outbound"
	"github.com/parleyhq/parley/tracing"
)

// FromConfig returns the Agent of c's model: and models: sections, so
// that the binary hands the sections over rather than copying them field
// by field. Each model has a connection pool of its own, of conns
// connections (as many as turns run at once: the gateway's workers), so
// that a slow fallback cannot starve the default model of connections,
// and a retry budget of its own; each attempt is bounded by the model's
// timeout, not the client. The model series of m are primed for every
// model and its fallbacks.
func FromConfig(c config.Config, conns int, tracer tracing.Tracer, tools *Registry, m *metrics.Metrics, log *slog.Logger) *Agent {
	pool := outbound.Options{Conns: conns}
	set := ModelsFrom(c)
	d := set.Default
	client := NewClient(d.BaseURL, d.APIKey.Reveal(), outbound.Client(pool))
	var models []ModelConfig
	chains := map[string][]string{}
	for _, ep := range set.Endpoints() {
		chains[ep.Key] = ep.Fallbacks
		if ep.Key == config.DefaultModelKey {
			continue
		}
		models = append(models, ModelConfig{
			Key: ep.Key, Name: ep.Name, Vision: ep.Vision, Timeout: ep.Timeout, MaxRetries: ep.MaxRetries, Fallbacks: ep.Fallbacks,
			Client: NewClient(ep.BaseURL, ep.APIKey.Reveal(), outbound.Client(pool)),
		})
	}
	if m != nil {
		m.PrimeModels(chains)
	}
	primary, _ := set.Endpoint(config.DefaultModelKey)
	budget, _ := config.Tool[*ToolsSection](c, ToolsPartName)
	return New(Config{
		Model:             d.Name,
		Vision:            d.Vision,
		Fallbacks:         primary.Fallbacks,
		Models:            models,
		MaxToolIterations: d.MaxToolIterations,
		Timeout:           d.Timeout,
		TurnTimeout:       d.TurnTimeout,
		MaxRetries:        d.MaxRetries, // 0 means no retries in both
		MaxTokens:         d.MaxTokens,
		SystemPrompt:      d.SystemPrompt,
		Tracer:            tracer,
		ToolBudget:        budget,

		MaxToolCallsPerAnswer: d.MaxToolCallsPerAnswer,
		MaxToolCallsPerTurn:   d.MaxToolCallsPerTurn,
	}, client, tools, m, log)
}
