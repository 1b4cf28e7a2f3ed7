package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"help explains every figure", []string{"-h"}, 0, []string{"e2e", "ack", "CPU", "Redis round trips", "new connections",
			"idle RSS", "throughput", "lost / doubled / misrouted", "other processes", "-redis-outage", "-parley", "ack probe", "-ack-probe", "-profile", "of which webhook", "ack in parley", "-redis-fsync", "-rate", "Slack API calls", "-context",
			"-calls", "-thread", "-threads", "chat.startStream", "post_burst"}},
		{"negative calls", []string{"-calls", "-1"}, 2, []string{"-calls"}},
		{"no threads", []string{"-thread", "5", "-threads", "0"}, 2, []string{"-threads"}},
		{"calls with a rate", []string{"-calls", "5", "-rate", "10"}, 2, []string{"-calls"}},
		{"unknown context", []string{"-context", "maybe"}, 2, []string{"-context"}},
		{"negative probe", []string{"-ack-probe", "-1"}, 2, []string{"-ack-probe"}},
		{"bad concurrency", []string{"-c", "1,x"}, 2, []string{"-c"}},
		{"zero concurrency", []string{"-c", "0"}, 2, []string{"-c"}},
		{"no runs", []string{"-runs", "0"}, 2, []string{"-runs"}},
		{"bad rate", []string{"-rate", "100,0"}, 2, []string{"-rate"}},
		{"rate with an outage", []string{"-rate", "100", "-redis-outage", "1s"}, 2, []string{"-rate"}},
		{"unknown fsync", []string{"-redis-fsync", "no"}, 2, []string{"-redis-fsync"}},
		{"unknown flag", []string{"-nope"}, 2, []string{"nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tt.code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
