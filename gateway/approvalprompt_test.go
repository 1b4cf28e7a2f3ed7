package gateway_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/redistest"
)

// prompter is a recorder that can update its prompts: the prompt's
// reference is its place among the replies.
type prompter struct{ *recorder }

func (p prompter) SendPrompt(ctx context.Context, m channels.Message, r channels.Reply) (map[string]string, error) {
	p.mu.Lock()
	n := len(p.got)
	p.mu.Unlock()
	return map[string]string{"reply": strconv.Itoa(n)}, p.Send(ctx, m, r)
}

func decidedIs(outcome string, already bool) func(channels.Reply) bool {
	return func(r channels.Reply) bool {
		return r.Decided != nil && r.Decided.Outcome == outcome && r.Decided.Already == already
	}
}

// TestApprovalDecisionsForButtons: a click arrives as "/approve ID" with
// no message id; every answer carries what became of the approval and the
// prompt's reference, so the adapter can update the prompt in place; a
// non-approver and another conversation's approval are refusals that name
// nothing; a second click hears who decided first.
func TestApprovalDecisionsForButtons(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ledger, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := prompter{newRecorder("slack")}
	a := newApprovalReplica(t, r, mcpURL, model, ch, time.Hour, time.Hour)

	submit(t, a.gw, from("U1", "E1", "log clicked"))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	id := ch.at(p).Approval.ID

	other := from("U1", "", "/approve "+id)
	other.Thread = "t2" // the same id, clicked in another conversation
	submit(t, a.gw, other)
	u := ch.waitFor(t, p, "refusing another conversation's approval", decidedIs(channels.DecisionUnknown, false))
	if d := ch.at(u).Decided; d.ID != "" || d.Tool != "" || d.Prompt != nil {
		t.Errorf("the refusal names the approval: %+v", d)
	}
	submit(t, a.gw, from("U2", "", "/approve "+id))
	n := ch.waitFor(t, p, "refusing a non-approver", decidedIs(channels.DecisionNotAllowed, false))
	if got := ch.at(n).Text; got != "You can't approve this." {
		t.Errorf("the non-approver heard %q", got)
	}

	submit(t, a.gw, from("UADMIN", "", "/approve "+id))
	d := ch.waitFor(t, p, "approving", decidedIs(channels.DecisionApproved, false))
	got := ch.at(d).Decided
	if got.ID != id || got.By != "UADMIN" || got.At.IsZero() || got.Prompt["reply"] != strconv.Itoa(p) || got.Tool != "ledger__append" {
		t.Errorf("decision %+v", got)
	}
	submit(t, a.gw, from("U1", "", "/approve "+id))
	again := ch.waitFor(t, p, "saying who approved", decidedIs(channels.DecisionApproved, true))
	if got := ch.at(again); got.Decided.By != "UADMIN" || got.Text != "Already approved by UADMIN." {
		t.Errorf("second click: %q %+v", got.Text, got.Decided)
	}
	ch.waitFor(t, p, "with the model's answer", textIs("done: appended line 1"))
	if got := ledger.appended(); len(got) != 1 {
		t.Errorf("the tool ran %d times: %q", len(got), got)
	}
}

// TestApprovalExpiryUpdatesThePrompt: nobody decides; the adapter that can
// update prompts is told, on the message that paused, that it expired,
// with the prompt's reference; the model's answer follows.
func TestApprovalExpiryUpdatesThePrompt(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	_, mcpURL := newLedgerServer(t)
	model := openaitest.New(t, openaitest.WithResponder(approvalModel))
	ch := prompter{newRecorder("slack")}
	a := newApprovalReplica(t, r, mcpURL, model, ch, 500*time.Millisecond, time.Hour)

	submit(t, a.gw, from("U1", "E1", "log one"))
	p := ch.waitFor(t, 0, "with a prompt", isPrompt)
	e := ch.waitFor(t, p, "updating the prompt", decidedIs(channels.DecisionExpired, false))
	done := ch.waitFor(t, p, "with the model's answer", textIs("done: approval expired"))
	if done < e {
		t.Errorf("the prompt was updated after the answer: %q", ch.texts())
	}
	s := ch.snapshot()[e]
	if s.msg.ID != "E1" || s.reply.Decided.Prompt["reply"] != strconv.Itoa(p) {
		t.Errorf("expiry sent to %+v with %+v", s.msg, s.reply.Decided)
	}
}
