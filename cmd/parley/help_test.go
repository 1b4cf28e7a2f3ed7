package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// `parley CMD --help` is a request, not a mistake: the command's help on
// stdout, exit 0, for every command and subcommand.
func TestCommandHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"}, {"chat", "-h"}, {"skills", "--help"}, {"skills", "list", "--help"},
		{"policy", "explain", "--help"}, {"tools", "list", "-help"}, {"config", "--help"},
		{"config", "check", "--help"}, {"usage", "--help"}, {"wechat", "login", "--help"},
		{"wechat", "--help"}, {"healthcheck", "--help"}, {"audit", "--help"}, {"triggers", "--help"}, {"triggers", "list", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
			}
			if stdout.Len() == 0 || stderr.Len() != 0 {
				t.Fatalf("want the help on stdout alone; stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), "help requested") {
				t.Fatalf("help is reported as an error:\n%s", stdout.String())
			}
		})
	}
}

// Every flag the README's Commands table gives a command is in that
// command's lines of the usage text.
func TestUsageListsEveryREADMEFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `parley ([a-z]+)([^`]*)` \\|")
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 8 {
		t.Fatalf("found %d command rows in the README", len(rows))
	}
	for _, r := range rows {
		command, synopsis := r[1], r[2]
		lines := commandUsage(command)
		for _, f := range flagRE.FindAllString(synopsis, -1) {
			if !strings.Contains(lines, f+" ") && !strings.Contains(lines, f+"]") {
				t.Errorf("the README gives `parley %s` the flag %s; its usage lines do not:\n%s", command, f, lines)
			}
		}
	}
}
