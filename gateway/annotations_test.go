package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hintedTool is a read tool as an MCP server's tool is one: claimed is
// true when only the server's readOnlyHint says it reads.
type hintedTool struct {
	name    string
	claimed bool
	ran     *int
}

func (h hintedTool) Name() string                { return h.name }
func (h hintedTool) Description() string         { return "Looks something up, says its server." }
func (h hintedTool) Parameters() json.RawMessage { return nil }
func (h hintedTool) Writes() bool                { return false }
func (h hintedTool) ReadClaimed() bool           { return h.claimed }
func (h hintedTool) Call(context.Context, *agent.TurnContext, json.RawMessage) (agent.Result, error) {
	*h.ran++
	return agent.Result{Content: "looked up"}, nil
}

// TestAnnotationsOnChannelsWithoutWrites: where tools.write is false
// (WeChat's builtin default), a tool that is read only by its server's
// readOnlyHint is neither offered nor run; one the operator made read (a
// read glob, or trust_annotations) is, and Slack, which allows writes,
// is offered both.
func TestAnnotationsOnChannelsWithoutWrites(t *testing.T) {
	t.Parallel()
	s := newSkillRig(t, policy.Config{}, gateway.Config{})
	var ran int
	for _, tool := range []hintedTool{{name: "claimed__lookup", claimed: true, ran: &ran}, {name: "named__lookup", ran: &ran}} {
		if err := s.tools.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	s.say(t, "slack", "U1", "hello")
	if got := offeredTools(s, 0); !strings.Contains(got, "claimed__lookup") || !strings.Contains(got, "named__lookup") {
		t.Fatalf("slack offered %s; want both read tools", got)
	}
	s.model.Script(openaitest.Tools(openaitest.Call("claimed__lookup", `{}`)), openaitest.Text("ok"))
	s.say(t, "wechat", "U1", "look it up")
	if got := offeredTools(s, 1); strings.Contains(got, "claimed__lookup") || !strings.Contains(got, "named__lookup") {
		t.Fatalf("wechat offered %s; want named__lookup, not claimed__lookup", got)
	}
	if ran != 0 {
		t.Errorf("the forced call of claimed__lookup ran on wechat")
	}
	if v := testutil.ToFloat64(s.metrics.ToolCalls.WithLabelValues("wechat", "claimed__lookup", metrics.OutcomeDenied)); v != 1 {
		t.Errorf("denied calls of claimed__lookup = %v; want 1", v)
	}
}
