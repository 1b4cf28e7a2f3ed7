package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/admin"
)

// These tests drive the console in a real headless Chromium (Debian's
// chromium package), as an operator would.

const chromiumPath = "/usr/bin/chromium"

// browserSession is one Chromium with one tab, recording every request the
// pages make and every console message.
type browserSession struct {
	t   *testing.T
	ctx context.Context
	out string

	mu       sync.Mutex
	requests []string
	console  []string
}

func newBrowser(t *testing.T) *browserSession {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("!!! SKIPPED: no %s — the admin console's browser tests did not run. Install it: apt-get install -y chromium (.ci/run does). !!!", chromiumPath)
	}
	out := os.Getenv("PARLEY_TEST_OUT")
	if out == "" {
		out = t.TempDir()
	} else {
		out = filepath.Join(out, "admin-screenshots")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browserSession{t: t, ctx: ctx, out: out}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, ev.Request.URL)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				b.console = append(b.console, fmt.Sprintf("console.%s", ev.Type))
			}
		case *runtime.EventExceptionThrown:
			b.console = append(b.console, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				b.console = append(b.console, fmt.Sprintf("%s %s: %s (%s)", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("screenshots in %s", out)
	return b
}

func (b *browserSession) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browserSession) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browserSession) eval(expr string) bool {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return ok
}

// screenshot saves the whole page as NAME.png and checks it is an image of
// the page's width.
func (b *browserSession) screenshot(name string, width int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if got := img.Bounds().Dx(); got != width {
		b.t.Errorf("screenshot %s is %d px wide, want %d: the page is wider than the window", name, got, width)
	}
	if err := os.WriteFile(filepath.Join(b.out, name+".png"), shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// checkPage checks what every page must be: nothing wider than the
// window, every form control labelled, a main heading.
func (b *browserSession) checkPage(name string) {
	b.t.Helper()
	if !b.eval(`document.documentElement.scrollWidth <= window.innerWidth`) {
		b.t.Errorf("%s: the page scrolls sideways", name)
	}
	if !b.eval(`[...document.querySelectorAll('input:not([type=hidden]), select')].every(e => e.labels.length > 0)`) {
		b.t.Errorf("%s: a form control has no label", name)
	}
	if !b.eval(`[...document.querySelectorAll('button')].every(e => (e.getAttribute('aria-label') || e.textContent).trim() !== '')`) {
		b.t.Errorf("%s: a button has no name", name)
	}
	if !b.eval(`document.querySelectorAll('main h1').length === 1 && document.documentElement.lang === 'en'`) {
		b.t.Errorf("%s: no single main heading or no lang", name)
	}
}

func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	w := newWorld(t)
	// Replica a serves two Slack apps, hr's down: the overview shows it.
	accounts := &fixedAccounts{}
	accounts.set(admin.AccountState{Platform: "slack", Account: "default", Up: true, Reached: "webhooks at /slack/events, /slack/commands, /slack/interactions"},
		admin.AccountState{Platform: "slack", Account: "hr", Error: "token refused: token_revoked (check the app's bot token)", Reached: "webhooks at /slack/events/hr, /slack/commands/hr, /slack/interactions/hr; Socket Mode"})
	a := w.replica(t, "a", options{accounts: accounts})
	second := w.replica(t, "b", options{})
	conv := w.converse(t, a, "C1", "release-notes")

	// Sign in on replica a.
	b.do("open the console",
		chromedp.Navigate(a.srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	b.screenshot("login", 1280)
	b.checkPage("login")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("replicas")),
	)
	if got := b.text("#replicas + .scroll"); !strings.Contains(got, "host-a") || !strings.Contains(got, "host-b") {
		t.Fatalf("the overview does not list both replicas: %q", got)
	}

	// Every page, screenshot at 1280×800.
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/admin/", "#accounts"},
		{"skills", "/admin/skills", "#skill-release-notes"},
		{"skill", "/admin/skills?skill=deploy-check&file=references/checklist.md", "#detail"},
		{"policies", "/admin/policies?scope=slack:T1:C1", ".explain"},
		{"conversations", "/admin/conversations", "#ch-slack"},
		{"conversation", "/admin/conversations?c=" + url.QueryEscape(conv), "#history"},
		{"tools", "/admin/tools", "#tools"},
		{"triggers", "/admin/triggers", "#webhooks"},
	} {
		b.do("open "+p.path, chromedp.Navigate(a.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		b.screenshot(p.name, 1280)
		b.checkPage(p.name)
	}

	// A down account looks down: its state in the colour of what is bad,
	// not of what is well.
	b.do("open the overview", chromedp.Navigate(a.srv.URL+"/admin/"), chromedp.WaitVisible(chromedp.ID("accounts")))
	if got := b.text("#accounts + .scroll"); !strings.Contains(got, "down (token refused: token_revoked") || !strings.Contains(got, "Socket Mode") {
		t.Errorf("the accounts table: %q", got)
	}
	if !b.eval(`(() => { const rows = [...document.querySelectorAll('tr.account')];
		const state = code => rows.find(r => r.querySelector('code').textContent === code).querySelector('.health');
		return getComputedStyle(state('hr')).color === getComputedStyle(document.querySelector('.health.bad')).color &&
			getComputedStyle(state('hr')).color !== getComputedStyle(state('default')).color; })()`) {
		t.Error("the down account does not look different from the one that is up")
	}

	// The Triggers page shows a webhook's refused request beside the
	// schedules.
	refuseWebhook(t, w)
	b.do("open the triggers", chromedp.Navigate(a.srv.URL+"/admin/triggers"), chromedp.WaitVisible(chromedp.ID("webhooks")))
	if got := b.text("#webhooks + .hint + .scroll"); !strings.Contains(got, "POST /hooks/am") || !strings.Contains(got, "unauthorized at 2026-03-02 08:30:15") {
		t.Errorf("the webhooks table: %q", got)
	}
	if got := b.text("#schedules + .hint + .scroll"); !strings.Contains(got, "digest") {
		t.Errorf("the schedules table: %q", got)
	}

	// The conversation shows the injection and the tool result, marked.
	b.do("open the conversation", chromedp.Navigate(a.srv.URL+"/admin/conversations?c="+url.QueryEscape(conv)), chromedp.WaitVisible(chromedp.CSS(".msg.injection")))
	if got := b.text(".msg.injection .who"); got != "Skill injection: release-notes" {
		t.Errorf("injection label %q", got)
	}
	if got := b.text(".msg.tool-result .who"); got != "Tool result: load_skill (untrusted data)" {
		t.Errorf("tool result label %q", got)
	}
	if !b.eval(`getComputedStyle(document.querySelector('.msg.injection')).backgroundColor !== getComputedStyle(document.querySelector('.msg.user')).backgroundColor &&
		getComputedStyle(document.querySelector('.msg.tool-result')).backgroundColor !== getComputedStyle(document.querySelector('.msg.user')).backgroundColor`) {
		t.Error("injections and tool results do not look different from user messages")
	}

	// Phone width.
	b.do("phone width", chromedp.EmulateViewport(390, 844), chromedp.Navigate(a.srv.URL+"/admin/"), chromedp.WaitVisible(chromedp.ID("accounts")))
	b.screenshot("overview-phone", 390)
	b.checkPage("overview on a phone")
	b.do("phone skills", chromedp.Navigate(a.srv.URL+"/admin/skills"), chromedp.WaitVisible(chromedp.ID("skill-release-notes")))
	b.screenshot("skills-phone", 390)
	b.do("back to 1280", chromedp.EmulateViewport(1280, 800))

	// Turn a skill off on replica a; replica b's overview shows it.
	b.do("turn release-notes off",
		chromedp.Navigate(a.srv.URL+"/admin/skills"),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Turn release-notes off"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Turn release-notes off"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if got := b.text(".notice"); !strings.Contains(got, "Skill release-notes is now disabled") {
		t.Fatalf("notice %q", got)
	}
	turnedOff := time.Now()
	b.do("replica b's console", chromedp.Navigate(second.srv.URL+"/admin/login"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	if b.eval(`!!document.getElementById('token')`) {
		b.do("sign in on b", chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(chromedp.ID("replicas")))
	}
	var seen time.Duration
	poll(t, "replica b's overview to show release-notes off", func() bool {
		b.do("reload b", chromedp.Navigate(second.srv.URL+"/admin/"), chromedp.WaitVisible(chromedp.ID("skills-summary")))
		if strings.Contains(b.text("#skills-summary"), "disabled: release-notes") {
			seen = time.Since(turnedOff)
			return true
		}
		return false
	})
	// A figure, not an assertion: timing depends on the machine.
	t.Logf("replica b's console showed the skill off %v after the click on replica a", seen.Round(time.Millisecond))
	b.screenshot("overview-replica-b", 1280)

	// Nothing came from outside the two servers, and no page complained.
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) < 10 {
		t.Fatalf("only %d requests recorded: the recording does not work", len(b.requests))
	}
	for _, u := range b.requests {
		if !strings.HasPrefix(u, a.srv.URL+"/") && !strings.HasPrefix(u, second.srv.URL+"/") {
			t.Errorf("a page loaded %s, outside the server", u)
		}
	}
	if len(b.console) > 0 {
		t.Errorf("console messages: %q", b.console)
	}
}
