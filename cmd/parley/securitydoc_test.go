package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
	"github.com/parleyhq/parley/skills"
)

// securityLimitKeys are the config keys of every limit the security model
// must name, each in a row of its limits table.
var securityLimitKeys = []string{
	"server.read_header_timeout", "server.read_timeout", "server.write_timeout", "server.idle_timeout",
	"server.max_concurrent_bodies",
	"sessions.max_message_chars", "sessions.queue_limit", "sessions.max_messages",
	"LEVEL.limits.user_per_minute", "LEVEL.limits.workspace_per_minute", "LEVEL.budget.tokens_per_user_day",
	"model.max_tokens", "model.timeout", "model.turn_timeout", "model.max_tool_iterations",
	"model.max_tool_calls_per_answer", "model.max_tool_calls_per_turn",
	"tools.mcp.servers.NAME.timeout", "tools.web_fetch.max_bytes", "tools.web_fetch.timeout",
	"skills.body_budget", "LEVEL.limits.reply_chars", "LEVEL.limits.reply_posts",
	"LEVEL.approval_timeout", "outbox.max_age", "admin.session_ttl",
	"LEVEL.context.max_messages", "LEVEL.context.max_bytes",
}

// TestOperationsSecurityModel: docs/operations.md has a "Security model"
// section that says what is authenticated where, who is admin of what and
// every limit with its default: each limit's key is named, its default is
// the one the configuration reference gives, and the limits fixed in the
// code are stated as the code has them.
func TestOperationsSecurityModel(t *testing.T) {
	ops := readDoc(t, "operations.md")
	start := strings.Index(ops, "\n## Security model\n")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Security model" section`)
	}
	section := ops[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, sub := range []string{"### What is authenticated where", "### Who is admin of what", "### Limits and their defaults"} {
		if !strings.Contains(section, "\n"+sub+"\n") {
			t.Errorf("the security model has no %q part", sub)
		}
	}
	for _, s := range []string{"SLACK_SIGNING_SECRET", "5 minutes", "FEISHU_ENCRYPT_KEY", "FEISHU_VERIFICATION_TOKEN",
		"msg_signature", "PARLEY_ADMIN_TOKEN", "admin.trusted_header", "PARLEY_METRICS_LISTEN", "policies.default.admins"} {
		if !strings.Contains(section, s) {
			t.Errorf("the security model does not mention %s", s)
		}
	}

	documented := defaultsOf(readDoc(t, "configuration.md"))
	limits := defaultsOf(section)
	for _, key := range securityLimitKeys {
		got, ok := limits[key]
		if !ok {
			t.Errorf("the security model's limits do not name `%s`", key)
			continue
		}
		if want := documented[key]; want != "" && got != want {
			t.Errorf("the security model gives `%s` the default %s, the configuration reference %s", key, got, want)
		}
	}
	for _, fixed := range []string{
		fmt.Sprintf("%d MiB, refused unread", channels.MaxWebhookBody>>20),
		fmt.Sprintf("%d KiB within", wxcrypto.MaxBody>>10),
		fmt.Sprintf("%d files and %d KiB", skills.MaxSkillReferenceFiles, skills.MaxSkillReferenceBytes>>10),
		fmt.Sprintf("%d KiB", skills.MaxReferenceFileBytes>>10),
	} {
		if !strings.Contains(section, fixed) {
			t.Errorf("the security model's limits do not say %q", fixed)
		}
	}
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var backticked = regexp.MustCompile("`([^`]+)`")

// defaultsOf maps each config key of a Markdown table in doc to the first
// `value` of its default column ("" when that column has none). The key
// is the first cell in backticks of a row; the default is the cell after
// the key's for the limits table (limit | key | default) and the third
// cell for the reference (key | type | default | meaning).
func defaultsOf(doc string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		for i, c := range cells {
			m := backticked.FindStringSubmatch(c)
			if m == nil || strings.TrimSpace(c) != m[0] || !strings.Contains(m[1], ".") {
				continue
			}
			def := i + 1
			if i == 0 && len(cells) >= 4 {
				def = 2 // the reference: key | type | default | meaning
			}
			if def < len(cells) {
				v := ""
				if d := backticked.FindStringSubmatch(cells[def]); d != nil {
					v = d[1]
				}
				if _, seen := out[m[1]]; !seen {
					out[m[1]] = v
				}
			}
			break
		}
	}
	return out
}
