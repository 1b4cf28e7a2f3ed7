package admin_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/agent/openaitest"
	"github.com/parleyhq/parley/audit"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/sessions"
)

// has fails unless body contains every want (HTML-unescaped).
func has(t *testing.T, what, body string, want ...string) {
	t.Helper()
	text := html.UnescapeString(body)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

func TestEveryPageShowsItsState(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	w.replica(t, "b", options{})
	conv := w.converse(t, a, "C1", "release-notes")
	c := a.client(t)
	c.signIn()

	cases := []struct {
		path string
		want []string
	}{
		{"/admin/", []string{"host-a", "host-b", "this one", "slack: ready", "answers", "Model errors in the last hour", "none disabled", "http://grafana.example:3000/d/parley", "sign-in"}},
		{"/admin/skills", []string{"release-notes", "deploy-check", "skill-authoring", "workspace", "user", "builtin", "untrusted", "not needed", "Turn off", "Reload skills", "Trust"}},
		{"/admin/skills?skill=deploy-check", []string{"Checks a deployment", "Run the checklist", "references/", "untrusted", "SKILL.md"}},
		{"/admin/skills?skill=deploy-check&file=references/checklist.md", []string{"1. Tests green", "<b>Rollback</b>"}},
		{"/admin/skills?skill=deploy-check&file=../../etc/passwd", []string{"deploy-check"}},
		{"/admin/policies", []string{"slack · T1 · C1"}},
		{"/admin/policies?scope=slack:T1:C1", []string{`Policy for channel "slack", workspace "T1", chat "C1"`, "save_skill_reference", "DENIED", `tools.deny "save_*"`, "policies.platforms.slack", "load_skill"}},
		{"/admin/policies?channel=wechat", []string{`Policy for channel "wechat"`, "tools.write: false"}},
		{"/admin/conversations", []string{"slack", conv}},
		{"/admin/conversations?c=" + url.QueryEscape(conv), []string{"User", "write the release notes", "Tool result: load_skill (untrusted data)", "Skill injection: release-notes", "Group the changes by kind", "Here are your notes.", "calls <code>load_skill("}},
		{"/admin/tools", []string{"load_skill", "save_skill_reference", "write", "read", "builtin"}},
	}
	for _, tc := range cases {
		got := c.get(tc.path)
		if got.status != http.StatusOK {
			t.Errorf("GET %s: %d", tc.path, got.status)
			continue
		}
		has(t, tc.path, got.body, tc.want...)
	}
	// A file outside the skill folder is refused, never shown.
	if got := c.get("/admin/skills?skill=deploy-check&file=../../etc/passwd"); strings.Contains(got.body, "root:") {
		t.Fatal("the console read a file outside the skill")
	}
	// Markup in a skill's files is shown as text, never rendered.
	if got := c.get("/admin/skills?skill=deploy-check&file=references/checklist.md"); strings.Contains(got.body, "<b>Rollback") {
		t.Fatal("a skill file's markup reached the page unescaped")
	}
}

func TestSkillActionsFollowTheChatRules(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	ctx := context.Background()
	act := func(action, skill string) response {
		t.Helper()
		resp := c.post("/admin/skills", url.Values{"csrf": {csrf}, "action": {action}, "skill": {skill}})
		if resp.status != http.StatusSeeOther {
			t.Fatalf("%s %s: %d %s", action, skill, resp.status, resp.body)
		}
		return c.get(resp.header.Get("Location"))
	}
	has(t, "off", act("off", "release-notes").body, "Skill release-notes is now disabled")
	if off, _ := r.state.Disabled(ctx); !off["release-notes"] {
		t.Fatal("off did not disable the skill")
	}
	has(t, "overview", c.get("/admin/").body, `disabled: <span class="disabled-skill">release-notes</span>`)
	has(t, "on", act("on", "release-notes").body, "Skill release-notes is now enabled")
	if off, _ := r.state.Disabled(ctx); off["release-notes"] {
		t.Fatal("on did not enable the skill")
	}
	has(t, "unknown", act("off", "no-such-skill").body, "There is no skill named no-such-skill")
	if off, _ := r.state.Disabled(ctx); off["no-such-skill"] {
		t.Fatal("an unknown skill was recorded as disabled")
	}
	has(t, "trust builtin", act("trust", "release-notes").body, "only workspace skills need trust")
	sk, _ := r.reg.Catalog().Get("deploy-check")
	has(t, "trust", act("trust", "deploy-check").body, "Skill deploy-check is trusted")
	if ok, _ := r.state.Trusted(ctx, sk.Path, sk.SHA256); !ok {
		t.Fatal("trust did not record the fingerprint")
	}
	writeSkill(t, w.home+"/skills", "new-skill", "A skill added after start.", "Body.\n")
	has(t, "reload", act("reload", "").body, "Skills reloaded")
	if _, ok := r.reg.Catalog().Get("new-skill"); !ok {
		t.Fatal("reload did not load the new skill")
	}
	if got := c.post("/admin/skills", url.Values{"csrf": {csrf}, "action": {"delete"}, "skill": {"release-notes"}}); got.status != http.StatusBadRequest {
		t.Fatalf("an unknown action: %d, want 400", got.status)
	}

	// Every change is audited: in the log and in the audit ledger.
	entries, err := audit.New(w.redis.Client, audit.Options{Prefix: w.redis.Prefix}).Query(ctx, audit.Filter{Kind: audit.KindAdmin})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, entry := range entries {
		if entry.User != "token" {
			t.Errorf("audit entry without its user: %+v", entry)
		}
		actions = append(actions, entry.Action+" "+entry.Target)
	}
	for _, want := range []string{"skill off release-notes", "skill on release-notes", "skill trust deploy-check sha256 " + sk.SHA256, "skills reload ", "sign-in "} {
		found := false
		for _, a := range actions {
			found = found || a == want
		}
		if !found {
			t.Errorf("audit: no %q in %q", want, actions)
		}
	}
	for _, want := range []string{`action="skill off" target=release-notes outcome=ok`, `action="skills reload"`} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log: no %q", want)
		}
	}
	has(t, "overview", c.get("/admin/").body, "skill trust", "skills reload")
}

func TestConversationActions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	ctx := context.Background()
	conv := w.converse(t, r, "C1", "release-notes")
	for i := range 2 { // two more rounds, so that there is something to compact
		w.model.Script(openaitest.Text("answer " + string(rune('x'+i))))
		before := r.ch.replies()
		m := messageFor("C1", i)
		if err := r.gw.Submit(ctx, m); err != nil {
			t.Fatal(err)
		}
		poll(t, "a reply", func() bool { return r.ch.replies() > before })
	}
	act := func(action, key string) string {
		t.Helper()
		resp := c.post("/admin/conversations", url.Values{"csrf": {csrf}, "action": {action}, "c": {key}})
		if resp.status != http.StatusSeeOther {
			t.Fatalf("%s: %d", action, resp.status)
		}
		return c.get(resp.header.Get("Location")).body
	}

	// While a turn holds the conversation, nothing changes under it.
	lock, err := r.store.TryLock(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	has(t, "busy reset", act("reset", conv), "is answering a message right now")
	has(t, "busy compact", act("compact", conv), "is answering a message right now")
	if n, _ := r.store.HistoryLen(ctx, conv); n == 0 {
		t.Fatal("a reset went through while the conversation was locked")
	}
	_ = lock.Release(ctx)

	before, _ := r.store.HistoryLen(ctx, conv)
	w.model.Script(openaitest.Text("Summary: the user asked for release notes."))
	has(t, "compact", act("compact", conv), "was compacted")
	after, _ := r.store.HistoryLen(ctx, conv)
	if after >= before {
		t.Fatalf("compact: %d messages before, %d after", before, after)
	}
	msgs, _ := r.store.History(ctx, conv)
	if msgs[0].Kind != sessions.KindSummary {
		t.Fatalf("compact: the first message is %+v, want the summary", msgs[0])
	}
	has(t, "compact again", act("compact", conv), "there was nothing to compact")
	has(t, "reset", act("reset", conv), "was cleared")
	if n, _ := r.store.HistoryLen(ctx, conv); n != 0 {
		t.Fatalf("reset left %d messages", n)
	}
	for _, form := range []url.Values{
		{"csrf": {csrf}, "action": {"reset"}},
		{"csrf": {csrf}, "action": {"reset"}, "c": {strings.Repeat("k", 2000)}},
		{"csrf": {csrf}, "action": {"drop"}, "c": {conv}},
	} {
		if got := c.post("/admin/conversations", form); got.status != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", form, got.status)
		}
	}
	for _, want := range []string{`action="conversation reset" target=` + conv + ` outcome=busy`, `action="conversation compact" target=` + conv + ` outcome=ok`, `action="conversation reset" target=` + conv + ` outcome=ok`} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log: no %q", want)
		}
	}
}

func TestNoticesCannotBeForged(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	c.signIn()
	got := c.get("/admin/?done=" + url.QueryEscape("<script>alert(1)</script>") + "&t=x")
	if strings.Contains(got.body, "<script>") || strings.Contains(got.body, `class="notice"`) {
		t.Fatal("an unknown notice code reached the page")
	}
	got = c.get("/admin/skills?done=off&t=" + url.QueryEscape(`<img src=x onerror=alert(1)>`))
	if strings.Contains(got.body, "<img") {
		t.Fatal("a notice's target was not escaped")
	}
}

// TestConsoleSaysHowItWasSignedIn: a sign-in with the admin token says so
// ("Signed in with the admin token"), not "Signed in as token"; and the
// Policies page keeps the conversation it explains selected in its list.
func TestConsoleSaysHowItWasSignedIn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	w.converse(t, a, "C1", "release-notes")
	c := a.client(t)
	c.signIn()
	page := c.get("/admin/policies?scope=slack:T1:C1")
	has(t, "policies page", page.body, "Signed in with the admin token")
	if strings.Contains(page.body, "Signed in as <strong>token</strong>") {
		t.Error("the token sign-in is shown as a user called token")
	}
	if !strings.Contains(page.body, `<option value="slack:T1:C1" selected>`) {
		t.Errorf("the explained scope is not selected in the list:\n%s", page.body)
	}
	if other := c.get("/admin/policies?channel=wechat"); strings.Contains(other.body, " selected>") {
		t.Error("a scope is selected that is not the one explained")
	}
}

// TestConversationIDShownWithoutTrailingSeparator: a conversation without
// a thread is listed as "slack:T1:C9", not "slack:T1:C9:", and the page
// and the reset take it back in either form.
func TestConversationIDShownWithoutTrailingSeparator(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	r := w.replica(t, "a", options{})
	c := r.client(t)
	csrf := c.signIn()
	w.model.Script(openaitest.Text("threadless answer"))
	m := channels.Message{ID: "m-threadless", Channel: "slack", Workspace: "T1", Chat: "C9", User: "U1", Text: "a question without a thread", Received: time.Now()}
	if err := r.gw.Submit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	poll(t, "the reply", func() bool { return r.ch.replies() > 0 })
	const shown = "slack:T1:C9"
	list := c.get("/admin/conversations").body
	has(t, "the list", list, "<code>"+shown+"</code>")
	if strings.Contains(list, shown+":") {
		t.Errorf("the list shows the key's trailing separator:\n%s", list)
	}
	for _, named := range []string{shown, m.ConversationKey()} {
		has(t, "the page of "+named, c.get("/admin/conversations?c="+url.QueryEscape(named)).body, "a question without a thread", "threadless answer")
	}
	resp := c.post("/admin/conversations", url.Values{"csrf": {csrf}, "action": {"reset"}, "c": {shown}})
	if resp.status != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.status)
	}
	if n, _ := r.store.HistoryLen(context.Background(), m.ConversationKey()); n != 0 {
		t.Errorf("the reset of %q left %d messages", shown, n)
	}
}

// TestThePoliciesPageShowsTables: the effective policy is shown as tables,
// as the Tools page shows tools, not as the text policy explain prints:
// one table row a tool, with its decision, rule and level in cells of
// their own, and the sections as headings.
func TestThePoliciesPageShowsTables(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	c := a.client(t)
	c.signIn()
	body := html.UnescapeString(c.get("/admin/policies?scope=slack:T1:C1").body)
	if strings.Contains(body, "<pre") {
		t.Errorf("the policy is shown as preformatted text:\n%s", body)
	}
	for _, heading := range []string{"TOOLS", "SKILLS", "ACCESS", "APPROVALS", "LIMITS", "MODEL"} {
		if !regexp.MustCompile(`<h3 id="policy-\d+">` + regexp.QuoteMeta(heading) + `</h3>`).MatchString(body) {
			t.Errorf("no heading %s", heading)
		}
	}
	for _, row := range []string{
		`<tr><th scope="row">save_skill_reference</th><td>builtin</td><td>write</td><td><span class="health bad">DENIED</span></td><td>tools.deny "save_*"</td><td>policies.platforms.slack</td></tr>`,
		`<tr><th scope="col">TOOL</th><th scope="col">SOURCE</th><th scope="col">KIND</th><th scope="col">DECISION</th><th scope="col">RULE</th><th scope="col">LEVEL</th></tr>`,
		`<tr><th scope="row">limits.reply_posts</th><td>10</td><td>builtin default</td></tr>`,
	} {
		if !strings.Contains(body, row) {
			t.Errorf("no table row %s in\n%s", row, body)
		}
	}
}

// consoleProfileName is the display name of the console tests' ops
// profile: markup, which the page must show as text.
const consoleProfileName = `Ops <script>alert(1)</script>`

// The Policies page shows the profile of the chosen scope and the level
// that chose it, its display name as text, never as markup.
func TestThePoliciesPageShowsTheProfile(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.replica(t, "a", options{})
	c := a.client(t)
	c.signIn()
	raw := c.get("/admin/policies?scope=slack:T1:C_ONCALL").body
	if strings.Contains(raw, "<script>alert(1)") {
		t.Errorf("the profile's display name is on the page as markup:\n%s", raw)
	}
	body := html.UnescapeString(raw)
	if !regexp.MustCompile(`<h3 id="policy-\d+">PROFILE</h3>`).MatchString(body) {
		t.Errorf("no PROFILE heading in\n%s", body)
	}
	for _, want := range []string{
		`<tr><th scope="row">ops (` + consoleProfileName + `)</th><td>its own system prompt (9 characters), instead of the default</td><td>policies.platforms.slack.workspaces.T1.chats.C_ONCALL</td></tr>`,
		"profiles.ops (chosen at policies.platforms.slack.workspaces.T1.chats.C_ONCALL) &lt; policies.platforms.slack.workspaces.T1.chats.C_ONCALL",
	} {
		if !strings.Contains(body, want) && !strings.Contains(body, html.UnescapeString(want)) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	// Another chat of the workspace has none.
	if body := html.UnescapeString(c.get("/admin/policies?scope=slack:T1:C1").body); !strings.Contains(body, `<tr><th scope="row">none</th><td>the default system prompt</td><td>builtin default</td></tr>`) {
		t.Errorf("a chat without a profile:\n%s", body)
	}
}
