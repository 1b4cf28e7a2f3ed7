// Command parley is the Parley chat-bot gateway: one binary that serves the
// webhooks and connections of every configured channel, chats on the
// console, and manages skills and configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	// Every chat platform Parley ships: config, policy and serve learn
	// them from their registrations.
	_ "github.com/parleyhq/parley/channels/install"
	// Every tool source (the web tools, the MCP servers): config and
	// serve learn them from their registrations too.
	_ "github.com/parleyhq/parley/agent/toolsource/install"
	// The triggers: section, whose parts the trigger sources own.
	_ "github.com/parleyhq/parley/triggers/section"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `parley — a chat-bot gateway for Slack, Feishu/Lark and WeChat

Usage:
  parley serve   [--config FILE]                    run the HTTP server and channel connections
  parley chat    [--config FILE] [-m TEXT [--image FILE]...] [--conversation ID]
                 [--print-conversation] [--verbose]
                                                    chat on the console (one turn with -m)
  parley skills  list [--json] [--verbose] | show NAME | lint [DIR|SKILL.md] | on NAME | off NAME | trust NAME
                                                    inspect and manage skills
  parley policy  explain --channel C [--account A] [--workspace W] [--chat X] [--wait D]
                                                    show the effective policy of a conversation
  parley tools   list [--json] [--wait D]           list every tool: source, read/write class, MCP server state
  parley mcp     login NAME [--config FILE]         sign in to an MCP server that asks for OAuth (once, for every replica)
  parley config  check [--config FILE]              validate and print the effective config
  parley usage   [--config FILE] [--since 24h] [--by user|chat|channel|model] [--json]
                                                    model tokens spent, read from Redis
  parley audit   [--config FILE] [--since 24h] [--user U] [--tool T] [--limit N] [--json]
                                                    write-tool calls, approvals and console changes, read from Redis
  parley triggers list [--config FILE] [--json]   webhooks with their last request, schedules with their next fire and last result
  parley wechat  login [--config FILE] [--codes N] | status [--config FILE]
                                                    log a personal-WeChat bot in (QR code), show its state
  parley healthcheck [--config FILE] [--addr HOST:PORT] [--ready]
                                                    exit 0 if the local server is healthy (for images without a shell)
  parley version                                    print the version

Environment variables override the config file; every key and variable: docs/configuration.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// errUsage marks errors that should print the usage text.
var errUsage = errors.New("usage")

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	env := &environment{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	if wantsHelp(args[1:]) {
		// The command's help is what was asked for, not an error: it goes
		// to stdout, and the command exits 0.
		env.stderr = stdout
		if subcommands[args[0]] && isHelpFlag(args[1]) {
			fmt.Fprint(stdout, commandUsage(args[0]))
			return 0
		}
	}
	var err error
	switch args[0] {
	case "serve":
		err = env.serve(args[1:])
	case "chat":
		err = env.chat(args[1:])
	case "config":
		err = env.config(args[1:])
	case "skills":
		err = env.skills(args[1:])
	case "policy":
		err = env.policy(args[1:])
	case "tools":
		err = env.toolsCLI(args[1:])
	case "wechat":
		err = env.wechat(args[1:])
	case "healthcheck":
		err = env.healthcheck(args[1:])
	case "usage":
		err = env.usageCLI(args[1:])
	case "triggers":
		err = env.triggersCLI(args[1:])
	case "mcp":
		err = env.mcpCLI(args[1:])
	case "audit":
		err = env.auditCLI(args[1:])
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "parley %s\n", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "parley: %v\n\n%s", err, usage)
		return 2
	}
	fmt.Fprintf(stderr, "parley: %v\n", err)
	return 1
}

// subcommands are the commands whose first argument is a subcommand
// (`parley skills list`): `parley skills --help` prints their lines of the
// usage, since no flag set has been made yet.
var subcommands = map[string]bool{"skills": true, "policy": true, "tools": true, "config": true, "wechat": true, "triggers": true, "mcp": true}

func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// wantsHelp reports whether args ask for help before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// commandUsage returns the lines of the usage text that describe command
// (its line and the lines that continue it).
func commandUsage(command string) string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	in := false
	for line := range strings.SplitSeq(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  parley "+command+" "):
			in = true
		case !strings.HasPrefix(line, "    "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// environment is what a command may touch of the process.
type environment struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// verbose logs every skill warning instead of one line counting them.
	verbose bool
	// oneShotChat is set for `parley chat -m`: one message whose answer
	// is the output, where the in-memory store needs no warning (the
	// process is meant to forget).
	oneShotChat bool
	// operator, when set, is the console user of `parley chat`: the
	// person at the terminal, who owns the process and so administers its
	// console conversations (policy.Resolver.WithOperator).
	operator string
}
