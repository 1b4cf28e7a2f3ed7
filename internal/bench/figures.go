package bench

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Percentile returns the p-th percentile (0–100) of ds by the nearest-rank
// method: the smallest value at or above which p % of the samples lie. ds
// need not be sorted; it is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s)) + 0.999999999)
	if rank < 1 {
		rank = 1
	}
	if rank > len(s) {
		rank = len(s)
	}
	return s[rank-1]
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), and the smallest and largest value: the range printed in
// brackets after every median.
func Median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// CPUTimes is the first "cpu" line of /proc/stat, in clock ticks.
type CPUTimes struct{ Busy, Total uint64 }

// ParseProcStat reads the machine-wide "cpu" line of /proc/stat. Idle and
// iowait count as not busy; everything else (user, nice, system, irq,
// softirq, steal) as busy.
func ParseProcStat(text string) (CPUTimes, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var t CPUTimes
		for i, v := range f[1:] {
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat: %w", err)
			}
			t.Total += n
			if i != 3 && i != 4 { // idle, iowait
				t.Busy += n
			}
		}
		return t, nil
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no cpu line")
}

// BusyShare is the share (0–1) of the machine that was busy between a and b.
func BusyShare(a, b CPUTimes) float64 {
	if b.Total <= a.Total {
		return 0
	}
	return float64(b.Busy-a.Busy) / float64(b.Total-a.Total)
}

// ParsePidStat returns utime+stime, in clock ticks, from /proc/PID/stat.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func ParsePidStat(text string) (uint64, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/PID/stat: no command name")
	}
	f := strings.Fields(text[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields", len(f)+2)
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/PID/stat utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/PID/stat stime: %w", err)
	}
	return u + s, nil
}

// ParseVmRSS returns the resident set size in bytes from /proc/PID/status.
func ParseVmRSS(text string) (uint64, error) { return parseStatusKB(text, "VmRSS") }

// RSS is a process's resident memory from /proc/PID/status, in bytes:
// VmRSS and two of its parts, RssAnon (anonymous: heap, stacks, the
// runtime's structures, the binary's written pages) and RssFile (pages of
// files: the executable's text and read-only data, shared libraries).
// The third part, RssShmem, is not kept: parley maps no shared memory.
type RSS struct{ Total, Anon, File uint64 }

// ParseRSS reads VmRSS, RssAnon and RssFile from /proc/PID/status.
func ParseRSS(text string) (RSS, error) {
	var r RSS
	var err error
	if r.Total, err = parseStatusKB(text, "VmRSS"); err != nil {
		return r, err
	}
	if r.Anon, err = parseStatusKB(text, "RssAnon"); err != nil {
		return r, err
	}
	if r.File, err = parseStatusKB(text, "RssFile"); err != nil {
		return r, err
	}
	return r, nil
}

// parseStatusKB returns one "Field:  N kB" line of /proc/PID/status, in bytes.
func parseStatusKB(text, field string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/PID/status: %s %q", field, line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/status %s: %w", field, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("/proc/PID/status: no %s", field)
}

// ParseRedisInfo returns one integer field of Redis's INFO reply.
func ParseRedisInfo(info, field string) (int64, error) {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis INFO: no %s", field)
}

// RedisStats is what a run reads from Redis's INFO stats:
// total_writes_processed (replies written to a client socket: a pipeline
// answered at once is one, so these are the round trips) and
// total_commands_processed (every command, pipelined or not).
type RedisStats struct{ Writes, Commands int64 }

// ParseRedisStats reads both counters from an INFO stats reply.
func ParseRedisStats(info string) (RedisStats, error) {
	var s RedisStats
	var err error
	if s.Writes, err = ParseRedisInfo(info, "total_writes_processed"); err != nil {
		return s, err
	}
	if s.Commands, err = ParseRedisInfo(info, "total_commands_processed"); err != nil {
		return s, err
	}
	return s, nil
}
