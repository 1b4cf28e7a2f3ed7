package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/config"
	tokenusage "github.com/parleyhq/parley/gateway/usage"
	"github.com/parleyhq/parley/internal/redistest"
	"github.com/parleyhq/parley/sessions"
	openai "github.com/sashabaranov/go-openai"
)

// `parley chat` turns by two users record their tokens in the history and
// in Redis; `parley usage` reads them back by user, chat, channel and
// model, as a table and as JSON, over a real Redis shared with turns of
// other platforms recorded as serve would.
func TestUsageReportsWhatTurnsSpent(t *testing.T) {
	t.Parallel() // its own Redis prefix, fakes, ports and home
	r := redistest.New(t)
	model := openaitest.New(t, openaitest.WithCachedTokens(4))
	cfg := writeConfig(t, fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix))
	env := map[string]string{"REDIS_URL": r.URL, "OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "sk-test", "PARLEY_HOME": t.TempDir()}
	ctx := context.Background()
	chat := func(user, conv, text string) {
		t.Helper()
		env["USER"] = user
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"chat", "--config", cfg, "--conversation", conv, "-m", text}, strings.NewReader(""), &out, &errb, mapEnv(env)); code != 0 {
			t.Fatalf("chat exited %d: %s", code, errb.String())
		}
	}
	chat("alice", "ops", "first question")
	chat("alice", "ops", "second question")
	chat("bob", "dev", "bob asks")
	// Turns of other platforms, as serve records them.
	store := tokenusage.New(r.Client, r.Prefix)
	if err := store.Record(ctx, tokenusage.Turn{Channel: "feishu", Workspace: "tenant1", Chat: "oc_vip", User: "ou_carol", Model: "backup", Prompt: 90000, Completion: 1000}); err != nil {
		t.Fatal(err)
	}

	// The turn's answer in the history carries its tokens.
	hist, err := sessions.NewRedis(r.Client, sessions.Options{Prefix: r.Prefix}).History(ctx, channels.Message{Channel: "console", Chat: "ops"}.ConversationKey())
	if err != nil {
		t.Fatal(err)
	}
	var answers []sessions.Usage
	for _, m := range hist {
		if m.Role == openai.ChatMessageRoleAssistant && m.Usage != nil {
			answers = append(answers, *m.Usage)
		}
	}
	if len(answers) != 2 || answers[0].Model != "default" || answers[0].Prompt <= 0 || answers[0].Completion <= 0 || answers[0].Cached != 4 {
		t.Fatalf("history answers carry %+v, want two with the turn's tokens", answers)
	}

	usage := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"usage", "--config", cfg}, args...), strings.NewReader(""), &out, &errb, mapEnv(env))
		return out.String(), errb.String(), code
	}
	var byUser tokenusage.Report
	out, errs, code := usage("--since", "1h", "--by", "user", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &byUser) != nil {
		t.Fatalf("usage --json exited %d: %s %s", code, out, errs)
	}
	if len(byUser.Rows) != 3 || byUser.Rows[0].User != "ou_carol" || byUser.Rows[1].User != "alice" || byUser.Rows[1].Turns != 2 ||
		byUser.Rows[2].User != "bob" || byUser.Rows[2].Turns != 1 || byUser.Rows[1].Cached != 8 {
		t.Errorf("by user = %+v", byUser.Rows)
	}
	if byUser.Total.Turns != 4 || byUser.Total.Prompt != 90000+byUser.Rows[1].Prompt+byUser.Rows[2].Prompt {
		t.Errorf("total = %+v", byUser.Total)
	}
	// The history's numbers are the report's.
	if alice := byUser.Rows[1]; alice.Prompt != int64(answers[0].Prompt+answers[1].Prompt) || alice.Completion != int64(answers[0].Completion+answers[1].Completion) {
		t.Errorf("alice's row %+v disagrees with her history %+v", alice, answers)
	}

	for _, c := range []struct {
		by   string
		want []string
	}{
		{"user", []string{"CHANNEL", "WORKSPACE", "USER", "CACHED%", "feishu", "ou_carol", "console", "alice", "bob", "TOTAL"}},
		{"chat", []string{"CHAT", "oc_vip", "ops", "dev", "TOTAL"}},
		{"channel", []string{"CHANNEL", "feishu", "console", "TOTAL"}},
		{"model", []string{"MODEL", "backup", "default", "TOTAL"}},
	} {
		out, errs, code := usage("--by", c.by)
		if code != 0 {
			t.Fatalf("--by %s exited %d: %s", c.by, code, errs)
		}
		if c.by == "user" {
			t.Logf("parley usage --by user:\n%s", out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("--by %s table lacks %q:\n%s", c.by, w, out)
			}
		}
	}
	// Bad flags are usage errors; no Redis is a clear error.
	for _, args := range [][]string{{"--by", "workspace"}, {"--since", "0s"}, {"--since", "2000h"}, {"extra"}} {
		if _, _, code := usage(args...); code != 2 {
			t.Errorf("usage %v exited %d, want 2", args, code)
		}
	}
	delete(env, "REDIS_URL")
	if _, errs, code := usage(); code != 1 || !strings.Contains(errs, "REDIS_URL") {
		t.Errorf("usage without Redis exited %d: %s", code, errs)
	}
}

// TestUsageByModelShowsTheModelsName: --by model names each model by its
// key and the model it asks for, as the operator knows it; a key the
// configuration no longer has stays bare.
func TestUsageByModelShowsTheModelsName(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeConfig(t, "model:\n  name: gpt-4o-mini\nmodels:\n  backup:\n    name: qwen2.5\n    base_url: http://127.0.0.1:11434/v1\n"), mapEnv(map[string]string{"PARLEY_HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	rep := tokenusage.Report{By: tokenusage.ByModel, Rows: []tokenusage.Row{
		{Model: "default", Turns: 3, Prompt: 30}, {Model: "backup", Turns: 2, Prompt: 20}, {Model: "gone", Turns: 1, Prompt: 10},
	}}
	var out bytes.Buffer
	if err := writeUsage(&environment{stdout: &out}, rep, agent.ModelsFrom(cfg)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"default (gpt-4o-mini)", "backup (qwen2.5)", "gone"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "gone (") {
		t.Errorf("a model the configuration lacks got a name:\n%s", out.String())
	}
}
