package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels/slack"
)

// readmeSlack returns the bot scopes and events the README's Slack
// bullet names.
func readmeSlack(t *testing.T) (scopes, events []string) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, bullet, _ := strings.Cut(string(readme), "- **Slack**")
	bullet, _, _ = strings.Cut(bullet, "\n- **")
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(bullet, -1) {
		switch tok := m[1]; {
		case tok == "commands" || regexp.MustCompile(`^[a-z_]+:[a-z_]+$`).MatchString(tok):
			scopes = append(scopes, tok)
		case tok == "app_mention" || strings.HasPrefix(tok, "message."):
			events = append(events, tok)
		}
	}
	slices.Sort(scopes)
	slices.Sort(events)
	return scopes, events
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	slices.Sort(out)
	return out
}

// The app manifests grant what the README says Parley needs, subscribe to
// its events, and point at the routes the adapter serves (over HTTP) or at
// none (Socket Mode).
func TestSlackAppManifests(t *testing.T) {
	t.Parallel()
	scopes, events := readmeSlack(t)
	if len(scopes) < 8 || len(events) < 5 {
		t.Fatalf("read %d scopes and %d events off the README's Slack bullet", len(scopes), len(events))
	}
	for _, tt := range []struct {
		file   string
		socket bool
	}{{"slack/manifest.yaml", false}, {"slack/manifest-socket-mode.yaml", true}} {
		t.Run(tt.file, func(t *testing.T) {
			m := readYAMLDocs(t, tt.file)[0]
			if got := strs(dig(m, "oauth_config", "scopes", "bot")); !slices.Equal(got, scopes) {
				t.Errorf("bot scopes %v; the README names %v", got, scopes)
			}
			if got := strs(dig(m, "settings", "event_subscriptions", "bot_events")); !slices.Equal(got, events) {
				t.Errorf("bot events %v; the README names %v", got, events)
			}
			if dig(m, "settings", "socket_mode_enabled") != tt.socket || dig(m, "settings", "interactivity", "is_enabled") != true {
				t.Errorf("socket_mode_enabled %v, interactivity %v; want %v and on", dig(m, "settings", "socket_mode_enabled"), dig(m, "settings", "interactivity", "is_enabled"), tt.socket)
			}
			cmd := dig(m, "features", "slash_commands").([]any)[0]
			if dig(cmd, "command") != slack.DefaultCommand {
				t.Errorf("slash command %v; Parley's default is %s", dig(cmd, "command"), slack.DefaultCommand)
			}
			urls := map[string]any{
				slack.EventsPath:       dig(m, "settings", "event_subscriptions", "request_url"),
				slack.InteractionsPath: dig(m, "settings", "interactivity", "request_url"),
				slack.CommandsPath:     dig(cmd, "url"),
			}
			for path, url := range urls {
				switch {
				case tt.socket && url != nil:
					t.Errorf("a Socket Mode app names the request URL %v", url)
				case !tt.socket && url != "https://YOUR-HOST"+path:
					t.Errorf("request URL %v; Parley serves https://YOUR-HOST%s", url, path)
				}
			}
		})
	}
}
