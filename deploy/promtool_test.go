package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/internal/parleybin"
	"github.com/parleyhq/parley/internal/redistest"
)

// The alert rules' unit tests, run by promtool (Debian's prometheus
// package; .ci/run installs it):
//
//	prometheus/alerts_test.yaml   every alert fires on its bad case
//	prometheus/healthy_test.yaml  and none on a fresh, healthy replica
const (
	alertsTestFile  = "prometheus/alerts_test.yaml"
	healthyTestFile = "prometheus/healthy_test.yaml"
)

// promtoolTests is the part of a promtool test file these checks read.
type promtoolTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			EvalTime  string `yaml:"eval_time"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func alertNames(t *testing.T) []string {
	t.Helper()
	var rf ruleFile
	readYAML(t, alertsFile, &rf)
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// TestEveryAlertHasPromtoolCases: an alert nobody has seen fire may never
// fire, and one nobody has seen stay quiet may page on every deploy.
func TestEveryAlertHasPromtoolCases(t *testing.T) {
	t.Parallel()
	cases := func(file string, firing bool) map[string]bool {
		var pt promtoolTests
		readYAML(t, file, &pt)
		if !slices.Contains(pt.RuleFiles, filepath.Base(alertsFile)) {
			t.Errorf("%s: rule_files %v does not load %s", file, pt.RuleFiles, filepath.Base(alertsFile))
		}
		out := map[string]bool{}
		for _, g := range pt.Tests {
			for _, c := range g.AlertRuleTest {
				if (len(c.ExpAlerts) > 0) == firing {
					out[c.AlertName] = true
				}
			}
		}
		return out
	}
	fires, quiet := cases(alertsTestFile, true), cases(healthyTestFile, false)
	names := alertNames(t)
	for _, name := range names {
		if !fires[name] {
			t.Errorf("alert %s has no promtool case in deploy/%s where it fires: add a test group with the series of its bad case and an alert_rule_test expecting it", name, alertsTestFile)
		}
		if !quiet[name] {
			t.Errorf("alert %s has no promtool case in deploy/%s where it stays quiet on a fresh, healthy replica: add it to that file's alert_rule_test with exp_alerts: []", name, healthyTestFile)
		}
	}
	for name := range fires {
		if !slices.Contains(names, name) {
			t.Errorf("deploy/%s tests alert %s, which %s does not define", alertsTestFile, name, alertsFile)
		}
	}
}

// promtool returns promtool's path, or skips: the unit tests need it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: promtool is not installed (Debian package prometheus; .ci/run installs it): the alert rules' unit tests did not run")
	}
	return p
}

func TestPromtoolUnitTests(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(promtool(t), "test", "rules", alertsTestFile, healthyTestFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestAlertsQuietOnAFreshServer scrapes a real `parley serve` just started
// on a real Redis, and asks promtool whether any shipped alert fires on
// those series, held for 45 minutes: from an age shorter than every rule's
// window to past the longest one. healthy_test.yaml says the same by hand;
// this keeps it true as the binary's series change.
func TestAlertsQuietOnAFreshServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	pt := promtool(t)
	r := redistest.New(t)
	cfg := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("redis:\n  prefix: %q\n", r.Prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "PARLEY_CONFIG="+cfg, "REDIS_URL="+r.URL)
	// parley_redis_up is set by /readyz, as a readiness probe would call it.
	get(t, base+"/readyz", http.StatusOK)
	series := scrape(t, base+"/metrics")
	for _, want := range []string{`parley_redis_up`, `parley_skill_reloads_total{outcome="error"}`} {
		if v, ok := series[want]; !ok || (want == "parley_redis_up" && v != 1) {
			t.Fatalf("the fresh server exports %s = %v (present: %v); the rules assume it at startup", want, v, ok)
		}
	}

	labels := `job="parley", instance="parley-0:8080"`
	type input struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	inputs := []input{{Series: "up{" + labels + "}", Values: "1x60"}}
	for _, s := range slices.Sorted(maps.Keys(series)) {
		name, rest, _ := strings.Cut(s, "{")
		sel := name + "{" + labels
		if rest = strings.TrimSuffix(rest, "}"); rest != "" {
			sel += ", " + rest
		}
		inputs = append(inputs, input{Series: sel + "}", Values: strconv.FormatFloat(series[s], 'g', -1, 64) + "x60"})
	}
	type silent struct {
		AlertName string `yaml:"alertname"`
		EvalTime  string `yaml:"eval_time"`
		ExpAlerts []any  `yaml:"exp_alerts"`
	}
	var checks []silent
	for _, name := range alertNames(t) {
		for _, at := range []string{"1m", "14m", "16m", "31m", "45m"} {
			checks = append(checks, silent{AlertName: name, EvalTime: at, ExpAlerts: []any{}})
		}
	}
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	body, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":        "1m",
			"input_series":    inputs,
			"alert_rule_test": checks,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fresh_test.yaml")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pt, "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("alerts fire on a fresh, healthy parley serve (%d series scraped): %v\n%s", len(series), err, out)
	}
}

// startServe runs `parley serve` on a free port with env added to this
// process's, and returns its base URL once it answers /healthz.
func startServe(t *testing.T, env ...string) string {
	t.Helper()
	bin := parleybin.Path(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "PARLEY_LISTEN="+addr, "PARLEY_HOME="+t.TempDir(), "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_API_KEY=sk-test")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("parley serve stderr:\n%s", stderr.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case <-exited:
			t.Fatalf("parley serve exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("parley serve never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get polls url until it answers want (the first answers of a starting
// server may differ), or fails after a deadline.
func get(t *testing.T, url string, want int) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return body
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrape reads the Prometheus text format: series (name and labels as
// written) to value, Parley's own series only.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(get(t, url, http.StatusOK)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "parley_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: %q: %v", url, line, err)
		}
		out[line[:i]] = v
	}
	if len(out) == 0 {
		t.Fatalf("scrape %s: no parley_ series", url)
	}
	return out
}
