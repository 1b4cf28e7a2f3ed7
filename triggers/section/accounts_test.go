package section_test

import (
	"strings"
	"testing"

	_ "github.com/parleyhq/parley/channels/slack"
)

// TestADestinationNamesAnAccountItsPlatformHas: a schedule or webhook may
// post as another of the platform's apps; an app the platform does not
// configure is refused with its key, not left to wait for an adapter.
func TestADestinationNamesAnAccountItsPlatformHas(t *testing.T) {
	const slack = `slack:
  bot_token: xoxb-main
  signing_secret: main-secret
  accounts:
    hr:
      bot_token: xoxb-hr
      signing_secret: hr-secret
`
	if _, err := load(t, slack+`triggers:
  schedules:
    digest: {cron: "0 9 * * *", to: {platform: slack, account: hr, workspace: T1, chat: C1}, answer: post, text: Good morning}
`); err != nil {
		t.Fatalf("a destination of a configured account: %v", err)
	}
	_, err := load(t, slack+`triggers:
  webhooks:
    am:
      kind: alertmanager
      token: s3cret
      to: {platform: slack, workspace: T1, chat: C2}
      routes:
        - match: {team: hr}
          to: {platform: slack, account: payroll, workspace: T1, chat: C3}
`)
	if err == nil || !strings.Contains(err.Error(), `triggers.webhooks.am.routes[0].to.account: "payroll" is not an account of slack (it configures default, hr)`) {
		t.Fatalf("an unknown account: %v", err)
	}
}
