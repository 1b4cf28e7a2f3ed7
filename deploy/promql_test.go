package deploy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// This file holds a small PromQL lexer and analyser: enough to find every
// metric name, every label matcher and every grouping label in an expression,
// not a full parser. It is strict on purpose: anything it does not understand
// is an error, so a query it cannot read fails the tests instead of slipping
// through unchecked.

type tokKind int

const (
	tIdent  tokKind = iota // metric, label, function or keyword
	tNumber                // numbers and durations: 0.9, 5m, 1e3, Inf
	tString                // "…", '…' or `…`, unquoted
	tVar                   // Grafana variable: $x, ${x}, ${x:fmt}
	tPunct                 // operators and brackets
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lex splits a PromQL expression, as written in a dashboard or rule file
// (Grafana variables included), into tokens.
func lex(s string) ([]token, error) {
	var out []token
	square := 0 // inside [...], ':' separates a subquery's range and step
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // comment to end of line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			start := i
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated string at %d", start)
				}
				if s[i] == c {
					i++
					break
				}
				if s[i] == '\\' && c != '`' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				b.WriteByte(s[i])
				i++
			}
			out = append(out, token{tString, b.String(), start})
		case c == '$':
			start := i
			i++
			if i < len(s) && s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d", start)
				}
				i += end + 1
			} else {
				for i < len(s) && (isIdentChar(s[i]) && s[i] != ':') {
					i++
				}
			}
			if i == start+1 {
				return nil, fmt.Errorf("lone $ at %d", start)
			}
			out = append(out, token{tVar, s[start:i], start})
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			// Numbers and durations: 0.99, 1e-3, 0x1f, 5m, 1h30m.
			start := i
			for i < len(s) && (isDigit(s[i]) || s[i] == '.' || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z') {
				if (s[i] == 'e' || s[i] == 'E') && i+2 < len(s) && (s[i+1] == '+' || s[i+1] == '-') && isDigit(s[i+2]) {
					i += 2
				}
				i++
			}
			out = append(out, token{tNumber, s[start:i], start})
		case isIdentStart(c) && !(c == ':' && square > 0):
			start := i
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			word := s[start:i]
			kind := tIdent
			if l := strings.ToLower(word); l == "inf" || l == "nan" {
				kind = tNumber
			}
			out = append(out, token{kind, word, start})
		default:
			start := i
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", ">=", "<=", "=~", "!~":
				out = append(out, token{tPunct, two, start})
				i += 2
				continue
			}
			if !strings.ContainsRune("(){}[],=<>+-*/%^@:", rune(c)) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			switch c {
			case '[':
				square++
			case ']':
				square--
			}
			out = append(out, token{tPunct, string(c), start})
			i++
		}
	}
	return out, nil
}

// promqlFunctions lists PromQL functions and aggregation operators: the only
// identifiers that may be followed by "(".
var promqlFunctions = setOf(
	// aggregation operators
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
	// functions
	"abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
	"day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv",
	"double_exponential_smoothing", "exp", "floor", "histogram_avg", "histogram_count",
	"histogram_fraction", "histogram_quantile", "histogram_stddev", "histogram_stdvar",
	"histogram_sum", "holt_winters", "hour", "idelta", "increase", "info", "irate",
	"label_join", "label_replace", "ln", "log10", "log2", "minute", "month", "predict_linear",
	"rate", "resets", "round", "scalar", "sgn", "sort", "sort_by_label", "sort_by_label_desc",
	"sort_desc", "sqrt", "time", "timestamp", "vector", "year",
	"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
	"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
	"present_over_time", "mad_over_time",
	"acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh",
	"deg", "rad", "pi",
	// @ modifiers: x @ start()
	"start", "end",
)

// Aggregation operators may take their by/without clause before the
// parenthesis: sum by (channel) (…).
var aggregations = setOf("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
	"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio")

// Keywords that introduce a parenthesised list of label names.
var labelListKeywords = setOf("by", "without", "on", "ignoring", "group_left", "group_right")

// Keywords that may stand between operands.
var binaryKeywords = setOf("and", "or", "unless", "bool", "atan2", "offset")

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

type matcher struct{ Label, Op, Value string }

// selector is one vector selector: a metric name and its label matchers.
type selector struct {
	Metric   string
	Matchers []matcher
}

// analysis is what the checks need to know about one expression.
type analysis struct {
	Selectors []selector
	// Grouping lists label names from by/without/on/ignoring/group_x lists.
	Grouping []string
}

// Metrics lists the metric names in order of appearance, without repeats.
func (a analysis) Metrics() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range a.Selectors {
		if !seen[s.Metric] {
			seen[s.Metric] = true
			out = append(out, s.Metric)
		}
	}
	return out
}

// analyze finds the selectors and grouping labels of a PromQL expression.
// An identifier is a metric name unless it is followed by "(" (a function,
// which must be a known one), is a keyword, or stands where labels do: inside
// {…} before a matcher operator, or inside the list after by, without, on,
// ignoring, group_left or group_right. Strings are never names.
func analyze(expr string) (analysis, error) {
	toks, err := lex(expr)
	if err != nil {
		return analysis{}, err
	}
	var a analysis
	var stack []string // open brackets
	closing := map[string]string{")": "(", "]": "[", "}": "{"}
	next := func(i int) *token {
		if i+1 < len(toks) {
			return &toks[i+1]
		}
		return nil
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.kind {
		case tIdent:
			n := next(i)
			lower := strings.ToLower(t.text)
			switch {
			case labelListKeywords[lower]:
				if n == nil || n.text != "(" {
					if lower == "group_left" || lower == "group_right" {
						continue // no extra labels to copy
					}
					return a, fmt.Errorf("%s at %d: want a label list", t.text, t.pos)
				}
				j := i + 2
				for ; j < len(toks) && toks[j].text != ")"; j++ {
					switch {
					case toks[j].kind == tIdent || toks[j].kind == tString:
						a.Grouping = append(a.Grouping, toks[j].text)
					case toks[j].text == ",":
					default:
						return a, fmt.Errorf("%s list at %d: unexpected %q", t.text, toks[j].pos, toks[j].text)
					}
				}
				if j == len(toks) {
					return a, fmt.Errorf("%s list at %d is not closed", t.text, t.pos)
				}
				i = j
			case binaryKeywords[lower]:
			case aggregations[lower] && n != nil && n.kind == tIdent && (strings.EqualFold(n.text, "by") || strings.EqualFold(n.text, "without")):
				// The clause is read on the next token.
			case n != nil && n.text == "(":
				if !promqlFunctions[t.text] && !promqlFunctions[lower] {
					return a, fmt.Errorf("unknown function %q at %d", t.text, t.pos)
				}
			default:
				sel := selector{Metric: t.text}
				if n != nil && n.text == "{" {
					ms, end, err := matchers(toks, i+1)
					if err != nil {
						return a, err
					}
					sel.Matchers = ms
					i = end
				}
				a.Selectors = append(a.Selectors, sel)
				if n := next(i); n != nil && (n.kind == tIdent && !binaryKeywords[strings.ToLower(n.text)] ||
					n.kind == tNumber || n.kind == tString || n.text == "(") {
					return a, fmt.Errorf("metric %q followed by %q at %d", t.text, n.text, n.pos)
				}
			}
		case tPunct:
			switch t.text {
			case "(", "[":
				stack = append(stack, t.text)
			case "{":
				// A selector without a leading name: {__name__="x", …}.
				ms, end, err := matchers(toks, i)
				if err != nil {
					return a, err
				}
				sel := selector{Matchers: ms}
				for _, m := range ms {
					if m.Label == "__name__" && m.Op == "=" {
						sel.Metric = m.Value
					}
				}
				if sel.Metric == "" {
					return a, fmt.Errorf("selector at %d has no metric name", t.pos)
				}
				a.Selectors = append(a.Selectors, sel)
				i = end
			case ")", "]", "}":
				if len(stack) == 0 || stack[len(stack)-1] != closing[t.text] {
					return a, fmt.Errorf("unbalanced %q at %d", t.text, t.pos)
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) > 0 {
		return a, fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	return a, nil
}

// matchers reads {label op "value", …} starting at the "{" at toks[open] and
// returns the matchers and the index of the closing "}".
func matchers(toks []token, open int) ([]matcher, int, error) {
	var out []matcher
	i := open + 1
	for {
		if i >= len(toks) {
			return nil, 0, fmt.Errorf("selector at %d is not closed", toks[open].pos)
		}
		if toks[i].text == "}" && toks[i].kind == tPunct {
			return out, i, nil
		}
		if i+2 >= len(toks) || toks[i].kind != tIdent {
			return nil, 0, fmt.Errorf("selector at %d: want a label name at %q", toks[open].pos, toks[i].text)
		}
		op := toks[i+1]
		if op.kind != tPunct || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
			return nil, 0, fmt.Errorf("selector at %d: want a matcher operator after %q", toks[open].pos, toks[i].text)
		}
		if toks[i+2].kind != tString {
			return nil, 0, fmt.Errorf("selector at %d: label %q wants a quoted value", toks[open].pos, toks[i].text)
		}
		out = append(out, matcher{toks[i].text, op.text, toks[i+2].text})
		i += 3
		if i < len(toks) && toks[i].text == "," {
			i++
		}
	}
}

func TestLex(t *testing.T) {
	t.Parallel()
	toks, err := lex(`sum by (le) (rate(x_bucket{a=~"b\"c"}[$__rate_interval])) > 1e-3 # note`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range toks {
		got = append(got, tk.text)
	}
	want := []string{"sum", "by", "(", "le", ")", "(", "rate", "(", "x_bucket", "{", "a", "=~", `b"c`, "}",
		"[", "$__rate_interval", "]", ")", ")", ">", "1e-3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lex:\n got %q\nwant %q", got, want)
	}
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		expr     string
		metrics  []string
		grouping []string
		err      string // substring of the error, "" for none
	}{
		{name: "bare metric", expr: "up", metrics: []string{"up"}},
		{name: "recording rule name", expr: `job:parley_turns:rate5m > 0`, metrics: []string{"job:parley_turns:rate5m"}},
		{
			name:     "quantile",
			expr:     `histogram_quantile(0.9, sum by (channel, le) (rate(parley_turn_duration_seconds_bucket{channel=~"$channel"}[$__rate_interval])))`,
			metrics:  []string{"parley_turn_duration_seconds_bucket"},
			grouping: []string{"channel", "le"},
		},
		{
			name:    "label names and string values are not metrics",
			expr:    `rate(parley_tool_calls_total{tool="rate", outcome!~"ok|sum"}[5m])`,
			metrics: []string{"parley_tool_calls_total"},
		},
		{
			name:     "by after the aggregation and binary keywords",
			expr:     `sum(rate(a_total[5m])) by (channel) / ignoring(reason) group_left sum without (reason) (b_total) and on() c offset 5m unless d == bool 0`,
			metrics:  []string{"a_total", "b_total", "c", "d"},
			grouping: []string{"channel", "reason", "reason"},
		},
		{name: "absent and topk", expr: `absent(parley_redis_up{job="parley"}) or topk(5, x)`, metrics: []string{"parley_redis_up", "x"}},
		{name: "subquery", expr: `max_over_time(rate(x_total[5m])[1h:1m])`, metrics: []string{"x_total"}},
		{name: "name matcher", expr: `{__name__="parley_redis_up", job="parley"}`, metrics: []string{"parley_redis_up"}},
		{name: "grafana variables", expr: `increase(x_total{channel=~"${channel:regex}"}[$__range])`, metrics: []string{"x_total"}},
		{name: "number literals", expr: `x > Inf or y < -NaN`, metrics: []string{"x", "y"}},
		{name: "comment", expr: "x # y_total{\n+ z", metrics: []string{"x", "z"}},
		{name: "unknown function", expr: `histogram_quantil(0.9, x)`, err: "unknown function"},
		{name: "unbalanced", expr: `sum(rate(x[5m])`, err: "unclosed"},
		{name: "wrong closer", expr: `sum(rate(x[5m)))`, err: "unbalanced"},
		{name: "unquoted value", expr: `x{channel=slack}`, err: "quoted value"},
		{name: "two names in a row", expr: `x y`, err: "followed by"},
		{name: "unterminated string", expr: `x{a="b}`, err: "unterminated"},
		{name: "by without list", expr: `sum by channel (x)`, err: "label list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := analyze(tc.expr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("analyze(%q) error = %v, want one containing %q", tc.expr, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("analyze(%q): %v", tc.expr, err)
			}
			if got := a.Metrics(); !reflect.DeepEqual(got, tc.metrics) {
				t.Errorf("metrics = %q, want %q", got, tc.metrics)
			}
			if !reflect.DeepEqual(a.Grouping, tc.grouping) {
				t.Errorf("grouping = %q, want %q", a.Grouping, tc.grouping)
			}
		})
	}
}

func TestAnalyzeMatchers(t *testing.T) {
	t.Parallel()
	a, err := analyze(`sum(rate(parley_tool_calls_total{channel=~"$channel", outcome="denied"}[5m]))`)
	if err != nil {
		t.Fatal(err)
	}
	want := []selector{{Metric: "parley_tool_calls_total", Matchers: []matcher{
		{"channel", "=~", "$channel"}, {"outcome", "=", "denied"},
	}}}
	if !reflect.DeepEqual(a.Selectors, want) {
		t.Errorf("selectors = %+v, want %+v", a.Selectors, want)
	}
}
