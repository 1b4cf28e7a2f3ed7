package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// A Feishu chat whose policy names another model is answered by it, and
// a chat on the default model whose endpoint is down is answered by the
// fallback, the metrics showing both: `parley serve` with two fake models,
// a fake Feishu and a real Redis.
func TestFeishuPolicyModelAndFallback(t *testing.T) {
	backup := openaitest.New(t, openaitest.WithAPIKey("sk-backup-key"))
	yaml := fmt.Sprintf(`model:
  name: primary-model
  max_retries: 1
  fallbacks: [backup]
models:
  backup: {name: backup-model, base_url: %q, api_key: "${BACKUP_KEY}", vision: true}
policies:
  platforms:
    feishu:
      workspaces:
        tenant1:
          chats:
            oc_vip: {model: backup}
`, backup.URL())
	s := startFeishuServeYAML(t, yaml, map[string]string{"BACKUP_KEY": "sk-backup-key"})

	vip := feishutest.Event(feishutest.Message{Token: e2eFeishuToken, MessageID: "om_vip", ChatID: "oc_vip", ChatType: "group", Sender: "ou_alice",
		Content: feishutest.Text("@_user_1 which model?"), Mentions: []feishutest.Mention{{Key: "@_user_1", OpenID: feishutest.BotOpenID, Name: "Parley"}}})
	if code := s.post(t, vip); code != 200 {
		t.Fatalf("vip chat: %d", code)
	}
	pollUntil(t, "the vip reply", s.stderr, func() bool { return len(s.api.Sent()) == 1 })
	if reqs := backup.Requests(); len(reqs) != 1 || reqs[0].Model != "backup-model" {
		t.Fatalf("the backup saw %d requests (%+v); want one naming backup-model", len(reqs), reqs)
	}
	if n := s.model.RequestCount(); n != 0 {
		t.Errorf("the default model was asked %d times for a chat on the backup", n)
	}

	// The default model is down: 503 on the first try and on its one retry.
	s.model.Script(openaitest.Error(http.StatusServiceUnavailable), openaitest.Error(http.StatusServiceUnavailable))
	if code := s.post(t, groupEvent("om_team", "ou_bob", "anyone there?", true)); code != 200 {
		t.Fatal(code)
	}
	pollUntil(t, "the fallback's reply", s.stderr, func() bool { return len(s.api.Sent()) == 2 })
	if got := s.api.Sent()[1].Text; got != "echo: anyone there?" {
		t.Errorf("reply %q; want the backup's answer", got)
	}
	if reqs := s.model.Requests(); len(reqs) != 2 || reqs[0].Model != "primary-model" {
		t.Errorf("the default model saw %d requests; want 2 naming primary-model", len(reqs))
	}
	if n := backup.RequestCount(); n != 2 {
		t.Errorf("the backup saw %d requests; want 2", n)
	}
	_, metrics := s.get(t, "/metrics")
	for _, want := range []string{
		`parley_llm_fallbacks_total{from="default",to="backup"} 1`,
		`parley_llm_requests_total{model="default",outcome="retry"} 1`,
		`parley_llm_requests_total{model="default",outcome="error"} 1`,
		`parley_llm_requests_total{model="backup",outcome="ok"} 2`,
		`parley_llm_tokens_total{channel="feishu",kind="prompt",model="backup"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(s.stderr.String(), "sk-backup-key") {
		t.Error("the backup's key reached the log")
	}
	if !strings.Contains(s.stderr.String(), "falls back to the next model") {
		t.Errorf("the fallback is not in the log:\n%s", s.stderr.String())
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr.String())
	}
}
