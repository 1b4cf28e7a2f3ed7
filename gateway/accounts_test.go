package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/triggers"
)

// accountRecorder is the adapter of one account of a platform.
type accountRecorder struct {
	*recorder
	account string
}

func (r accountRecorder) Account() string { return r.account }

// TestRepliesLeaveFromTheAccountTheMessageCameTo: with two apps of one
// platform registered, each message is answered by its own app's adapter,
// the two apps' messages in one thread are two conversations (the same
// event id in each is no duplicate of the other's), the default
// account's conversation key is the one it always was, and each account's
// messages are counted under its account label.
func TestRepliesLeaveFromTheAccountTheMessageCameTo(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{Workers: 2})
	hr := accountRecorder{newRecorder("slack"), "hr"}
	rg.gw.Register(hr)
	ops := msg("t", "Ev1", "deploy?")
	other := ops
	other.Account, other.Text = "hr", "holidays?"
	rg.submit(t, ops)
	rg.submit(t, other)
	got := rg.ch.wait(t, 1)
	if len(got) != 1 || got[0].reply.Text != "echo: deploy?" {
		t.Errorf("the default app sent %+v", got)
	}
	gotHR := hr.wait(t, 1)
	if len(gotHR) != 1 || gotHR[0].reply.Text != "echo: holidays?" || gotHR[0].msg.Account != "hr" {
		t.Errorf("the hr app sent %+v", gotHR)
	}
	if k := ops.ConversationKey(); k != "slack:T1:C1:t" {
		t.Errorf("default account's key = %q", k)
	}
	for key, want := range map[string]string{ops.ConversationKey(): "deploy?", other.ConversationKey(): "holidays?"} {
		h, err := rg.store.History(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Content != want {
			t.Errorf("history %s = %+v", key, h)
		}
	}
	for account, want := range map[string]float64{channels.DefaultAccount: 1, "hr": 1} {
		if v := testutil.ToFloat64(rg.metrics.AccountMessages.WithLabelValues("slack", account)); v != want {
			t.Errorf("parley_account_messages_received_total{account=%q} = %v, want %v", account, v, want)
		}
	}
}

// TestWorkPostsAsTheAccountItNames: a trigger's destination may name
// another of the platform's apps; its post leaves from that app, and a
// destination naming an app nobody registered is refused.
func TestWorkPostsAsTheAccountItNames(t *testing.T) {
	t.Parallel()
	rg := newRig(t, gateway.Config{})
	hr := accountRecorder{newRecorder("slack"), "hr"}
	rg.gw.Register(hr)
	to := dest
	to.Account = "hr"
	if err := rg.gw.SubmitWork(context.Background(), triggers.Work{ID: "d1", Trigger: "schedule:digest", To: to, Answer: triggers.AnswerPost, Text: "payday tomorrow"}); err != nil {
		t.Fatal(err)
	}
	got := hr.wait(t, 1)
	if got[0].reply.Text != "payday tomorrow" || got[0].msg.Account != "hr" {
		t.Fatalf("the hr app sent %+v", got)
	}
	to.Account = "payroll"
	if err := rg.gw.SubmitWork(context.Background(), triggers.Work{ID: "d2", Trigger: "schedule:digest", To: to, Answer: triggers.AnswerPost, Text: "x"}); err == nil {
		t.Fatal("work for an app nobody registered was taken")
	}
}

// TestEachAppAnswersWithItsOwnProfile: two apps in one workspace, the hr
// app's account level choosing the hr profile: in the same channel each
// app's conversation gets its own system prompt, the default app's the
// default one.
func TestEachAppAnswersWithItsOwnProfile(t *testing.T) {
	t.Parallel()
	tree := policy.Config{Platforms: map[string]policy.PlatformPolicy{"slack": {
		Accounts: map[string]config.Level{"hr": {Profile: "hr"}},
	}}}
	pol := policy.New(tree).WithProfiles(&policy.Profiles{ByName: map[string]policy.Profile{"hr": {SystemPromptAppend: hrAppend}}})
	rg := newRig(t, gateway.Config{Policy: pol})
	hr := accountRecorder{newRecorder("slack"), "hr"}
	rg.gw.Register(hr)
	rg.submit(t, msg("t", "Ev1", "hello"))
	rg.ch.wait(t, 1)
	m := msg("t", "Ev2", "hello")
	m.Account = "hr"
	rg.submit(t, m)
	hr.wait(t, 1)
	got := systemMessages(t, rg.model)
	if len(got) != 2 {
		t.Fatalf("%d model requests, want 2", len(got))
	}
	if c := systemContent(t, got[0]); strings.Contains(c, hrAppend) {
		t.Errorf("the default app's prompt has the hr profile's: %q", c)
	}
	if c := systemContent(t, got[1]); !strings.Contains(c, hrAppend) {
		t.Errorf("the hr app's prompt lacks its profile's: %q", c)
	}
}
