package commands

import (
	"context"
	"strings"

	"github.com/parleyhq/parley/channels"
)

// Schedules are the schedules of a chat that /schedule manages
// (triggers/schedule's Chats). A refusal is said to the administrator; an
// error is a failure of Redis.
type Schedules interface {
	Add(ctx context.Context, m channels.Message, spec, prompt string) (id, refusal string, err error)
	List(ctx context.Context, m channels.Message) (string, error)
	Remove(ctx context.Context, m channels.Message, id string) (refusal string, err error)
}

// scheduleUsage is the answer to a /schedule the command cannot read.
const scheduleUsage = "Use `/schedule add \"CRON\" PROMPT` (five fields in UTC, e.g. `\"0 9 * * 1-5\"`, or `@daily`; in another zone `\"CRON_TZ=Europe/Berlin 0 9 * * 1-5\"`), `/schedule list` or `/schedule remove ID`."

// scheduleCommand is /schedule, for the administrators of a chat.
func scheduleCommand(s Schedules) Command {
	return Command{
		Names:   []string{"/schedule", "/schedules"},
		Who:     Admin,
		Help:    []string{"`/schedule add \"CRON\" PROMPT | list | remove ID` — run a prompt in this chat on a schedule (administrators)"},
		Refusal: "Sorry, only an administrator of this chat can manage its schedules.",
		Run: func(ctx context.Context, c *Call) (string, error) {
			if s == nil {
				return "Schedules need Redis, which this bot does not use.", nil
			}
			sub, rest, _ := strings.Cut(c.Args, " ")
			rest = strings.TrimSpace(rest)
			switch strings.ToLower(sub) {
			case "list", "":
				return s.List(ctx, c.Msg)
			case "add":
				return scheduleAdd(ctx, s, c.Msg, rest)
			case "remove", "rm", "delete":
				if rest == "" || strings.ContainsAny(rest, " \n") {
					return scheduleUsage, nil
				}
				refusal, err := s.Remove(ctx, c.Msg, rest)
				if err != nil || refusal != "" {
					return refusal, err
				}
				return "Removed schedule `" + rest + "`.", nil
			}
			return scheduleUsage, nil
		},
	}
}

func scheduleAdd(ctx context.Context, s Schedules, m channels.Message, args string) (string, error) {
	spec, prompt, ok := cutSpec(args)
	if !ok {
		return scheduleUsage, nil
	}
	id, refusal, err := s.Add(ctx, m, spec, prompt)
	if err != nil || refusal != "" {
		return refusal, err
	}
	zone, fields := "UTC", spec
	if z, rest, ok := cutZone(spec); ok {
		zone, fields = z, rest
	}
	return "Scheduled `" + id + "`: `" + fields + "` (" + zone + ") in this chat. `/schedule remove " + id + "` stops it.", nil
}

// cutZone splits the CRON_TZ=ZONE (or TZ=ZONE) prefix off spec, for the
// reply, as the store reads it; which zone it names is the store's to
// check (Schedules.Add refuses a bad one).
func cutZone(spec string) (zone, rest string, ok bool) {
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if after, found := strings.CutPrefix(spec, prefix); found {
			zone, rest, _ = strings.Cut(after, " ")
			return zone, strings.TrimSpace(rest), true
		}
	}
	return "", spec, false
}

// quotes are the quotation marks a cron expression may be written in:
// chat apps turn straight quotes into curly ones.
var quotes = map[rune]rune{'"': '"', '“': '”', '„': '“', '「': '」'}

// cutSpec splits `"CRON" PROMPT` (or `@daily PROMPT`) into its parts.
func cutSpec(args string) (spec, prompt string, ok bool) {
	if strings.HasPrefix(args, "@") {
		spec, prompt, _ = strings.Cut(args, " ")
		return spec, strings.TrimSpace(prompt), true
	}
	for i, open := range args {
		if i > 0 {
			break
		}
		closing, isQuote := quotes[open]
		if !isQuote {
			return "", "", false
		}
		body := args[len(string(open)):]
		end := strings.IndexRune(body, closing)
		if end < 0 && closing != open {
			end = strings.IndexRune(body, open)
		}
		if end < 0 {
			return "", "", false
		}
		return strings.TrimSpace(body[:end]), strings.TrimSpace(body[end+len(string(closing)):]), true
	}
	return "", "", false
}
