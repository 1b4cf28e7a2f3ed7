package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/metrics"
)

const (
	dashboardFile     = "grafana/dashboards/parley.json"
	alertsFile        = "prometheus/alerts.yml"
	prometheusFile    = "prometheus/prometheus.yml"
	datasourceFile    = "grafana/provisioning/datasources/prometheus.yml"
	dashProvisionFile = "grafana/provisioning/dashboards/parley.yml"
)

// targetLabels are attached by Prometheus to every scraped series.
var targetLabels = []string{"job", "instance"}

// catalog is what the binary exports, from metrics.New().
type catalog struct {
	series map[string]bool     // every Parley series name
	labels map[string][]string // series name -> labels it carries
}

func newCatalog() catalog {
	m := metrics.New()
	c := catalog{series: map[string]bool{}, labels: map[string][]string{}}
	for _, s := range m.SeriesNames() {
		c.series[s] = true
	}
	for _, d := range m.Declared() {
		if d.Type == "histogram" {
			c.labels[d.Name+"_bucket"] = append(slices.Clone(d.Labels), "le")
			c.labels[d.Name+"_sum"] = d.Labels
			c.labels[d.Name+"_count"] = d.Labels
			continue
		}
		c.labels[d.Name] = d.Labels
	}
	c.labels["up"] = nil
	return c
}

// exported reports whether a query may name metric: a Parley series, a Go or
// process collector metric, or Prometheus's own up.
func (c catalog) exported(metric string) bool {
	if strings.HasPrefix(metric, "parley_") {
		return c.series[metric]
	}
	return metric == "up" || strings.HasPrefix(metric, "go_") || strings.HasPrefix(metric, "process_")
}

// knownLabels returns the labels a series carries and whether we know them
// (we do not list the Go and process collectors' labels).
func (c catalog) knownLabels(metric string) ([]string, bool) {
	l, ok := c.labels[metric]
	if !ok {
		return nil, false
	}
	return append(slices.Clone(l), targetLabels...), true
}

// checkExpr returns every problem with one expression: unreadable, names a
// metric the binary does not export, matches or groups by a label no metric
// in it has, or (for dashboards) leaves out the $channel filter.
func (c catalog) checkExpr(expr string, dashboard bool, jobName string) (analysis, []string) {
	a, err := analyze(expr)
	if err != nil {
		return a, []string{"cannot read: " + err.Error()}
	}
	var problems []string
	if len(a.Selectors) == 0 {
		problems = append(problems, "names no metric")
	}
	all := map[string]bool{} // labels of every metric in the expression
	allKnown := true
	for _, s := range a.Selectors {
		if !c.exported(s.Metric) {
			problems = append(problems, "metric "+s.Metric+" is not exported by parley (see metrics.New)")
			continue
		}
		labels, known := c.knownLabels(s.Metric)
		if !known {
			allKnown = false
			continue
		}
		for _, l := range labels {
			all[l] = true
		}
		filtered := false
		for _, m := range s.Matchers {
			if !slices.Contains(labels, m.Label) {
				problems = append(problems, s.Metric+" has no label "+m.Label)
			}
			if m.Label == "job" && jobName != "" && m.Value != jobName {
				problems = append(problems, `job="`+m.Value+`" but prometheus.yml scrapes job `+jobName)
			}
			if m.Label == "channel" && m.Op == "=~" && m.Value == "$channel" {
				filtered = true
			}
		}
		if dashboard && slices.Contains(labels, "channel") && !filtered {
			problems = append(problems, s.Metric+` has a channel label but no channel=~"$channel" filter`)
		}
	}
	if allKnown {
		for _, g := range a.Grouping {
			if !all[g] {
				problems = append(problems, "groups by "+g+" but no metric in the expression has that label")
			}
		}
	}
	return a, problems
}

// resultLabels is what a query's result can be labelled with: grouping labels
// when it aggregates, the metrics' own labels otherwise. It is generous (a
// union); it catches typos and labels that were never there.
func (c catalog) resultLabels(a analysis) map[string]bool {
	out := map[string]bool{}
	for _, g := range a.Grouping {
		out[g] = true
	}
	for _, s := range a.Selectors {
		l, known := c.knownLabels(s.Metric)
		if !known {
			l = targetLabels // Go and process collector metrics: at least these
		}
		for _, x := range l {
			out[x] = true
		}
	}
	return out
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("deployment file missing: %v", err)
	}
	return b
}

func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	if err := yaml.Unmarshal(read(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// ---- Prometheus configuration

type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// scrapeJob returns the job name that scrapes parley:8080.
func scrapeJob(t *testing.T) string {
	t.Helper()
	var cfg promConfig
	readYAML(t, prometheusFile, &cfg)
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, "parley:8080") {
				return sc.JobName
			}
		}
	}
	t.Fatalf("%s: no scrape config targets parley:8080", prometheusFile)
	return ""
}

func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	var cfg promConfig
	readYAML(t, prometheusFile, &cfg)
	found := false
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName != "parley" {
			continue
		}
		found = true
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job parley scrapes %s, parley serves /metrics", sc.MetricsPath)
		}
		if len(sc.StaticConfigs) == 0 || !slices.Contains(sc.StaticConfigs[0].Targets, "parley:8080") {
			t.Errorf("job parley does not target parley:8080: %+v", sc.StaticConfigs)
		}
	}
	if !found {
		t.Errorf("%s has no job parley", prometheusFile)
	}
	loadsAlerts := false
	for _, f := range cfg.RuleFiles {
		// Prometheus resolves rule files relative to its config file.
		p := filepath.Join(filepath.Dir(prometheusFile), f)
		if matches, _ := filepath.Glob(p); len(matches) == 0 {
			t.Errorf("rule_files entry %q matches no file next to %s", f, prometheusFile)
		}
		if filepath.Clean(p) == filepath.Clean(alertsFile) {
			loadsAlerts = true
		}
	}
	if !loadsAlerts {
		t.Errorf("%s does not load %s in rule_files", prometheusFile, alertsFile)
	}
}

// ---- Alerting rules

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	promDuration    = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	alertName       = regexp.MustCompile(`^Parley[A-Z][A-Za-z0-9]*$`)
	templateLabelRe = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	severities      = []string{"critical", "warning", "info"}
)

func TestAlertRules(t *testing.T) {
	t.Parallel()
	c := newCatalog()
	job := scrapeJob(t)
	var rf ruleFile
	readYAML(t, alertsFile, &rf)
	if len(rf.Groups) == 0 {
		t.Fatalf("%s has no rule groups", alertsFile)
	}
	names := map[string]bool{}
	alerts := 0
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: want a name and at least one rule", g.Name)
		}
		for i, r := range g.Rules {
			id := r.Alert
			if id == "" {
				id = r.Record
			}
			if id == "" {
				t.Errorf("group %s rule %d has neither alert nor record", g.Name, i)
				id = fmt.Sprintf("%s#%d", g.Name, i)
			}
			if r.Expr == "" {
				t.Errorf("%s: no expr", id)
				continue
			}
			a, problems := c.checkExpr(r.Expr, false, job)
			for _, p := range problems {
				t.Errorf("%s: %s\n  expr: %s", id, p, r.Expr)
			}
			if r.Alert == "" {
				continue
			}
			alerts++
			if !alertName.MatchString(r.Alert) {
				t.Errorf("%s: alert names are CamelCase and start with Parley", r.Alert)
			}
			if names[r.Alert] {
				t.Errorf("%s: duplicate alert name", r.Alert)
			}
			names[r.Alert] = true
			if !promDuration.MatchString(r.For) {
				t.Errorf("%s: for: %q, want a duration such as 5m", r.Alert, r.For)
			}
			if !slices.Contains(severities, r.Labels["severity"]) {
				t.Errorf("%s: labels.severity %q, want one of %v", r.Alert, r.Labels["severity"], severities)
			}
			for _, k := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no annotations.%s", r.Alert, k)
				}
			}
			// {{ $labels.x }} renders empty when the result has no label x.
			res := c.resultLabels(a)
			if len(a.Grouping) > 0 {
				res = map[string]bool{}
				for _, g := range a.Grouping {
					res[g] = true
				}
			}
			for k, v := range r.Annotations {
				for _, m := range templateLabelRe.FindAllStringSubmatch(v, -1) {
					if !res[m[1]] {
						t.Errorf("%s: annotations.%s uses $labels.%s, which the expression's result does not carry", r.Alert, k, m[1])
					}
				}
			}
		}
	}
	if alerts == 0 {
		t.Errorf("%s defines no alerts", alertsFile)
	}
}

// ---- Grafana dashboard

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Datasource  any    `json:"datasource"`
	GridPos     *struct{ H, W, X, Y int }
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Datasource   any    `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // rows keep collapsed panels here
}

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Datasource any    `json:"datasource"`
			Multi      bool   `json:"multi"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(read(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows: a collapsed row holds its panels inside itself.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// usesDatasourceVar reports whether a panel or target datasource is the
// ${datasource} variable, so the dashboard works with any Prometheus.
func usesDatasourceVar(ds any) bool {
	switch v := ds.(type) {
	case string:
		return v == "${datasource}" || v == "$datasource"
	case map[string]any:
		uid, _ := v["uid"].(string)
		return uid == "${datasource}" || uid == "$datasource"
	}
	return false
}

var legendLabelRe = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

func TestDashboardStructure(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard wants a uid and a title")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want a current one (>= 36)", d.SchemaVersion)
	}
	ids := map[int]string{}
	targets := 0
	for _, p := range allPanels(d.Panels) {
		if strings.TrimSpace(p.Title) == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q has no gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit (s, bytes, percent, reqps, short, …)", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			targets++
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
			}
			if !usesDatasourceVar(tg.Datasource) && !usesDatasourceVar(p.Datasource) {
				t.Errorf("panel %q target %s does not use the ${datasource} variable", p.Title, tg.RefID)
			}
		}
	}
	if targets == 0 {
		t.Errorf("dashboard has no queries")
	}

	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	if i, ok := vars["datasource"]; !ok || d.Templating.List[i].Type != "datasource" || d.Templating.List[i].Query != "prometheus" {
		t.Errorf("want a datasource variable of type datasource for prometheus")
	}
	if i, ok := vars["channel"]; !ok {
		t.Errorf("want a channel variable")
	} else {
		v := d.Templating.List[i]
		if !v.Multi || !v.IncludeAll {
			t.Errorf("channel variable: want multi and include-all")
		}
		if !usesDatasourceVar(v.Datasource) {
			t.Errorf("channel variable does not use the ${datasource} variable")
		}
	}
}

var labelValuesRe = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	c := newCatalog()
	job := scrapeJob(t)
	d := loadDashboard(t)
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			a, problems := c.checkExpr(tg.Expr, true, job)
			for _, pr := range problems {
				t.Errorf("panel %q target %s: %s\n  expr: %s", p.Title, tg.RefID, pr, tg.Expr)
			}
			res := c.resultLabels(a)
			for _, m := range legendLabelRe.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if !res[m[1]] {
					t.Errorf("panel %q target %s: legend uses {{%s}}, which the query's result does not carry", p.Title, tg.RefID, m[1])
				}
			}
		}
	}
	// Template variable queries: label_values(metric, label).
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sm := labelValuesRe.FindStringSubmatch(strings.TrimSpace(q))
		if sm == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q)
			continue
		}
		labels, known := c.knownLabels(sm[1])
		if !c.exported(sm[1]) || !known {
			t.Errorf("variable %s: metric %s is not exported by parley", v.Name, sm[1])
		} else if !slices.Contains(labels, sm[2]) {
			t.Errorf("variable %s: %s has no label %s", v.Name, sm[1], sm[2])
		}
	}
}

// TestDashboardCoversEveryMetric keeps the dashboard growing with the code: a
// metric nobody can see is a metric nobody watches.
func TestDashboardCoversEveryMetric(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	used := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			a, err := analyze(tg.Expr)
			if err != nil {
				continue // reported by TestDashboardQueriesUseExportedMetrics
			}
			for _, m := range a.Metrics() {
				used[m] = true
			}
		}
	}
	var missing []string
	for _, dcl := range metrics.New().Declared() {
		name := dcl.Name
		if dcl.Type == "histogram" {
			if used[name+"_bucket"] || used[name+"_sum"] || used[name+"_count"] {
				continue
			}
		} else if used[name] {
			continue
		}
		missing = append(missing, name)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s has no panel for %v; add one", dashboardFile, missing)
	}
}

// TestCheckExpr shows that the checks catch what they are for.
func TestCheckExpr(t *testing.T) {
	t.Parallel()
	c := newCatalog()
	for _, tc := range []struct {
		expr      string
		dashboard bool
		want      string // substring of a problem, "" for none
	}{
		{expr: `sum by (channel) (rate(parley_messages_received_total{channel=~"$channel"}[5m]))`, dashboard: true},
		{expr: `histogram_quantile(0.9, sum by (le) (rate(parley_llm_request_duration_seconds_bucket[5m])))`, dashboard: true},
		{expr: `up{job="parley"} == 0 or absent(parley_redis_up) or go_goroutines > 1e4 or process_open_fds > 1000`},
		{expr: `rate(parley_turn_duration_seconds[5m])`, want: "not exported"},
		{expr: `rate(parley_message_received_total[5m])`, want: "not exported"},
		{expr: `rate(http_requests_total[5m])`, want: "not exported"},
		{expr: `rate(parley_messages_received_total{chanel="slack"}[5m])`, want: "has no label chanel"},
		{expr: `rate(parley_llm_requests_total{channel="slack"}[5m])`, want: "has no label channel"},
		{expr: `parley_turn_duration_seconds_count{le="1"}`, want: "has no label le"},
		{expr: `sum by (reason) (rate(parley_replies_sent_total[5m]))`, want: "groups by reason"},
		{expr: `rate(parley_messages_received_total[5m])`, dashboard: true, want: "no channel"},
		{expr: `parley_redis_up{job="prom"}`, want: "scrapes job parley"},
		{expr: `sum(rate(parley_messages_received_total[5m])`, want: "cannot read"},
		{expr: `42`, want: "names no metric"},
	} {
		_, problems := c.checkExpr(tc.expr, tc.dashboard, "parley")
		joined := strings.Join(problems, "; ")
		switch {
		case tc.want == "" && len(problems) > 0:
			t.Errorf("checkExpr(%q) = %s, want no problems", tc.expr, joined)
		case tc.want != "" && !strings.Contains(joined, tc.want):
			t.Errorf("checkExpr(%q) = %q, want a problem containing %q", tc.expr, joined, tc.want)
		}
	}
}

// ---- Grafana provisioning

func TestGrafanaProvisioning(t *testing.T) {
	t.Parallel()
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, URL, Access string
		} `yaml:"datasources"`
	}
	readYAML(t, datasourceFile, &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) == 0 {
		t.Fatalf("%s: want apiVersion 1 and a datasource", datasourceFile)
	}
	if d := ds.Datasources[0]; d.Type != "prometheus" || d.URL != "http://prometheus:9090" {
		t.Errorf("%s: datasource %+v, want type prometheus at http://prometheus:9090", datasourceFile, d)
	}

	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name    string
			Type    string
			Options struct {
				Path string
			}
		} `yaml:"providers"`
	}
	readYAML(t, dashProvisionFile, &dp)
	if dp.APIVersion != 1 || len(dp.Providers) == 0 {
		t.Fatalf("%s: want apiVersion 1 and a provider", dashProvisionFile)
	}
	if p := dp.Providers[0]; p.Type != "file" || !strings.HasPrefix(p.Options.Path, "/") {
		t.Errorf("%s: provider %+v, want type file with an absolute path", dashProvisionFile, p)
	}
}
