package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// Filter selects entries, newest first. Its fields come from a command
// line or a query string: Validate refuses what no entry could match and
// what would make a reader scan without bound.
type Filter struct {
	// Since is how far back to look (zero: DefaultSince).
	Since time.Duration
	// User and Tool, when set, keep the entries of that user (or
	// approver) and tool, exactly.
	User string
	Tool string
	// Kind, when set, keeps the entries of that kind (KindTool, …).
	Kind string
	// Limit is the most entries returned (zero: DefaultLimit).
	Limit int
}

// Bounds of a filter.
const (
	DefaultSince = 24 * time.Hour
	DefaultLimit = 100
	MaxLimit     = 1000
	// maxFilterText bounds User and Tool: longer than any entry's field.
	maxFilterText = maxField
	// maxScan bounds the entries one query reads, matching or not.
	maxScan = 100_000
	page    = 500
)

// ErrFilter is what Validate's errors wrap.
var ErrFilter = errors.New("audit: bad filter")

// Validate checks f against the ledger's retention.
func (f Filter) Validate(retention time.Duration) error {
	switch {
	case f.Since < 0:
		return fmt.Errorf("%w: since must be a positive duration such as 24h", ErrFilter)
	case f.Since > retention:
		return fmt.Errorf("%w: since %s is beyond the ledger's retention (%s)", ErrFilter, f.Since, retention)
	case f.Limit < 0 || f.Limit > MaxLimit:
		return fmt.Errorf("%w: limit must be between 1 and %d", ErrFilter, MaxLimit)
	}
	switch f.Kind {
	case "", KindTool, KindApproval, KindAdmin:
	default:
		return fmt.Errorf("%w: kind must be %s, %s or %s", ErrFilter, KindTool, KindApproval, KindAdmin)
	}
	for name, v := range map[string]string{"user": f.User, "tool": f.Tool} {
		if len(v) > maxFilterText || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
			return fmt.Errorf("%w: %s must be at most %d printable characters", ErrFilter, name, maxFilterText)
		}
	}
	return nil
}

// ParseFilter reads a filter from text (a command line's flags, a query
// string's values): since a duration, limit a number; empty is the
// default.
func ParseFilter(since, user, tool, limit string) (Filter, error) {
	f := Filter{User: user, Tool: tool}
	if since != "" {
		d, err := time.ParseDuration(since)
		if err != nil || len(since) > 32 {
			return f, fmt.Errorf("%w: since must be a duration such as 24h or 30m", ErrFilter)
		}
		f.Since = d
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return f, fmt.Errorf("%w: limit must be between 1 and %d", ErrFilter, MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func (f Filter) matches(e Entry) bool {
	return (f.User == "" || e.User == f.User || e.Approver == f.User) && (f.Tool == "" || e.Tool == f.Tool) && (f.Kind == "" || e.Kind == f.Kind)
}

// Query returns the entries f selects, newest first. It refuses a filter
// Validate refuses, and reads at most a bounded number of entries.
func (l *Ledger) Query(ctx context.Context, f Filter) ([]Entry, error) {
	if err := f.Validate(l.opts.Retention); err != nil {
		return nil, err
	}
	if f.Since == 0 {
		f.Since = DefaultSince
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	start := strconv.FormatInt(l.opts.Now().Add(-f.Since).UnixMilli(), 10)
	end := "+"
	var out []Entry
	for read := 0; read < maxScan && len(out) < f.Limit; {
		msgs, err := l.client.XRevRangeN(ctx, l.key, end, start, page).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("audit: read the ledger: %w", err)
		}
		for _, m := range msgs {
			var e Entry
			if raw, ok := m.Values["e"].(string); ok && json.Unmarshal([]byte(raw), &e) == nil && f.matches(e) {
				out = append(out, e)
				if len(out) == f.Limit {
					break
				}
			}
		}
		read += len(msgs)
		if len(msgs) < page {
			break
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	return out, nil
}
