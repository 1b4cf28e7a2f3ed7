package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/gateway"
	"github.com/parleyhq/parley/sessions"
)

// testqueue is a top-level section registered by this test the way a
// package registers its own: its type, its defaults, its validation and
// a check that reads another section.
type testqueue struct {
	Depth int    `yaml:"depth"`
	Name  string `yaml:"name"`
}

func (q *testqueue) Env() []config.EnvVar {
	return []config.EnvVar{config.Env("TESTQUEUE_NAME", &q.Name)}
}

func (q *testqueue) Validate() error {
	if q.Depth < 0 {
		return errors.New("depth: must not be negative")
	}
	return nil
}

func init() {
	config.RegisterSection(config.SectionSpec{
		Name:      "testqueue",
		NewConfig: func() config.SectionConfig { return &testqueue{Depth: 3, Name: "q"} },
		Check: func(c config.Config) error {
			q, _ := config.SectionOf[*testqueue](c, "testqueue")
			if w := gateway.SectionFrom(c).Workers; q.Depth > 100*w {
				return fmt.Errorf("testqueue.depth: %d is more than 100 a worker (gateway.workers: %d)", q.Depth, w)
			}
			return nil
		},
	})
}

func TestRegisteredSectionLoads(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "testqueue:\n  depth: 7\nsessions:\n  keep_rounds: 2\n"), func(k string) string {
		return map[string]string{"TESTQUEUE_NAME": "from-env"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	q, ok := config.SectionOf[*testqueue](cfg, "testqueue")
	if !ok || q.Depth != 7 || q.Name != "from-env" {
		t.Fatalf("testqueue = %+v, %v; want depth 7 from the file and the name from TESTQUEUE_NAME", q, ok)
	}
	if s := sessions.FromConfig(cfg); s.KeepRounds != 2 || s.QueueLimit != sessions.DefaultConfig().QueueLimit {
		t.Errorf("sessions = %+v; want keep_rounds from the file, the rest defaults", s)
	}
	var found bool
	for _, b := range config.EnvBindings() {
		if b.Name == "TESTQUEUE_NAME" {
			found = b.Key == "testqueue.name"
		}
	}
	if !found {
		t.Error("TESTQUEUE_NAME is not bound to testqueue.name")
	}
}

func TestRegisteredSectionProblemsNameTheirKeyAndLine(t *testing.T) {
	for _, tt := range []struct {
		name, file, want string
	}{
		{"its own Validate", "listen: ':1'\ntestqueue:\n  depth: -1\n", "line 3: testqueue.depth: must not be negative"},
		{"an unknown key", "testqueue:\n  dpth: 1\n", `line 2: unknown key "dpth" in testqueue (did you mean "depth"?)`},
		{"its Check, reading gateway:", "gateway:\n  workers: 1\ntestqueue:\n  depth: 101\n", "line 4: testqueue.depth: 101 is more than 100 a worker (gateway.workers: 1)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, tt.file), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want it to contain %q", err, tt.want)
			}
		})
	}
}

// The sections moved to their packages print where the core's were, so
// that what `parley config check` prints does not change order.
func TestSectionsPrintInTheFileOrder(t *testing.T) {
	out, err := config.Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	var tops []string
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && line[0] != ' ' && line[0] != '-' {
			key, _, _ := strings.Cut(line, ":")
			tops = append(tops, key)
		}
	}
	want := []string{"listen", "home", "workspace", "log", "model", "models", "redis", "sessions", "gateway", "outbox", "server", "skills", "policies", "profiles", "admin", "audit", "media", "files", "testqueue", "tools"}
	if got := strings.Join(tops[:len(want)], " "); got != strings.Join(want, " ") {
		t.Errorf("top-level keys printed as\n%s\nwant\n%s", got, strings.Join(want, " "))
	}
}

func TestRegisterSectionRefusesTakenNames(t *testing.T) {
	for _, name := range []string{"listen", "slack", "testqueue"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterSection(%q) did not panic", name)
				}
			}()
			config.RegisterSection(config.SectionSpec{Name: name, NewConfig: func() config.SectionConfig { return &testqueue{} }})
		}()
	}
}
