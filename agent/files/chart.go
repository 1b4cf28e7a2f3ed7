package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-analyze/charts"
)

// Bounds of a chart spec: a picture to look at, not a data dump.
const (
	MaxChartSeries  = 8
	MaxChartPoints  = 500 // per series
	MaxChartTitle   = 120 // characters
	MaxChartName    = 60  // characters of a series' name
	ChartWidth      = 900
	ChartHeight     = 500
	maxChartLabels  = 12
	unixSecondsFrom = 1e9 // an x from here on is read as a Unix time
)

// ChartSpec is what send_file takes to draw a chart:
// {"type": "line"|"bar", "title": …, "series": [{"name": …, "points": [[t, v]…]}]}.
// t is a number (a Unix time in seconds, or any x) or a label.
type ChartSpec struct {
	Type   string        `json:"type"`
	Title  string        `json:"title"`
	Series []ChartSeries `json:"series"`
}

// ChartSeries is one line, or one set of bars.
type ChartSeries struct {
	Name   string       `json:"name"`
	Points []ChartPoint `json:"points"`
}

// ChartPoint is [t, v].
type ChartPoint struct {
	X     string  // the label as given (a number's text, or the label)
	Num   float64 // the number, when IsNum
	IsNum bool
	V     float64
}

// UnmarshalJSON reads [t, v].
func (p *ChartPoint) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil || len(pair) != 2 {
		return errors.New("a point is [t, v]")
	}
	if err := json.Unmarshal(pair[1], &p.V); err != nil {
		return errors.New("a point's v is a number")
	}
	if err := json.Unmarshal(pair[0], &p.Num); err == nil {
		p.IsNum, p.X = true, strconv.FormatFloat(p.Num, 'g', -1, 64)
		return nil
	}
	if err := json.Unmarshal(pair[0], &p.X); err != nil {
		return errors.New("a point's t is a number or a label")
	}
	return nil
}

// Check reports what is wrong with s, for the model.
func (s *ChartSpec) Check() error {
	switch {
	case s.Type != "line" && s.Type != "bar":
		return fmt.Errorf("chart type %q: use \"line\" or \"bar\"", s.Type)
	case utf8.RuneCountInString(s.Title) > MaxChartTitle:
		return fmt.Errorf("the title is over %d characters", MaxChartTitle)
	case len(s.Series) == 0:
		return errors.New("the chart has no series")
	case len(s.Series) > MaxChartSeries:
		return fmt.Errorf("%d series; at most %d", len(s.Series), MaxChartSeries)
	}
	for i, se := range s.Series {
		switch {
		case utf8.RuneCountInString(se.Name) > MaxChartName:
			return fmt.Errorf("series %d: its name is over %d characters", i+1, MaxChartName)
		case len(se.Points) == 0:
			return fmt.Errorf("series %d has no points", i+1)
		case len(se.Points) > MaxChartPoints:
			return fmt.Errorf("series %d has %d points; at most %d", i+1, len(se.Points), MaxChartPoints)
		}
		for _, p := range se.Points {
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) || utf8.RuneCountInString(p.X) > MaxChartName {
				return fmt.Errorf("series %d: a point is not a finite value with a short label", i+1)
			}
		}
	}
	return nil
}

// Render draws s as a PNG of ChartWidth×ChartHeight. The x values of every
// series are merged into one axis (numbers in order, labels as first
// met); a series without a value at some x has a gap there.
func Render(s ChartSpec) (png []byte, err error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	xs, labels := axis(s.Series)
	values := make([][]float64, len(s.Series))
	names := make([]string, len(s.Series))
	for i, se := range s.Series {
		row := make([]float64, len(xs))
		for j := range row {
			row[j] = charts.GetNullValue()
		}
		for _, p := range se.Points {
			row[slices.Index(xs, p.X)] = p.V
		}
		values[i], names[i] = row, se.Name
		if names[i] == "" {
			names[i] = fmt.Sprintf("series %d", i+1)
		}
	}
	defer func() {
		// The library is not ours: a spec it cannot draw is the model's
		// refusal, never the turn's end.
		if p := recover(); p != nil {
			png, err = nil, fmt.Errorf("the chart could not be drawn: %v", p)
		}
	}()
	p := charts.NewPainter(charts.PainterOptions{Width: ChartWidth, Height: ChartHeight, OutputFormat: charts.ChartOutputPNG})
	labelCount := min(len(labels), maxChartLabels)
	if s.Type == "bar" {
		opt := charts.NewBarChartOptionWithData(values)
		opt.Title.Text, opt.CategoryAxis.Labels, opt.CategoryAxis.LabelCount = s.Title, labels, labelCount
		opt.Legend.SeriesNames = names
		err = p.BarChart(opt)
	} else {
		opt := charts.NewLineChartOptionWithData(values)
		opt.Title.Text, opt.XAxis.Labels, opt.XAxis.LabelCount = s.Title, labels, labelCount
		opt.Legend.SeriesNames = names
		err = p.LineChart(opt)
	}
	if err != nil {
		return nil, fmt.Errorf("the chart could not be drawn: %w", err)
	}
	return p.Bytes()
}

// axis is the x values of every series, merged, and their labels: Unix
// times as UTC clock times.
func axis(series []ChartSeries) (xs, labels []string) {
	allNum, first, last := true, math.Inf(1), math.Inf(-1)
	nums := map[string]float64{}
	for _, se := range series {
		for _, p := range se.Points {
			if !slices.Contains(xs, p.X) {
				xs = append(xs, p.X)
			}
			allNum = allNum && p.IsNum
			if p.IsNum {
				nums[p.X] = p.Num
				first, last = min(first, p.Num), max(last, p.Num)
			}
		}
	}
	if !allNum {
		return xs, xs
	}
	slices.SortFunc(xs, func(a, b string) int { return cmpFloat(nums[a], nums[b]) })
	labels = make([]string, len(xs))
	for i, x := range xs {
		labels[i] = x
		if first >= unixSecondsFrom {
			layout := "15:04"
			if last-first > 2*86400 {
				layout = "01-02 15:04"
			}
			labels[i] = time.Unix(int64(nums[x]), 0).UTC().Format(layout)
		}
	}
	return xs, labels
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
