package bench

import (
	"os"
	"reflect"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Percentile sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p0 is the smallest", ms(3, 1, 2), 0, 1 * time.Millisecond},
		{"p50 of odd", ms(5, 1, 3), 50, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tt.in, tt.p, got, tt.want)
			}
		})
	}
	in := ms(3, 1, 2)
	Percentile(in, 50)
	if in[0] != 3*time.Millisecond {
		t.Fatal("Percentile sorted its argument")
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{4}, 4, 4, 4},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{2.0, 9.5, 1.5, 7, 3}, 3, 1.5, 9.5},
	}
	for _, tt := range tests {
		med, lo, hi := Median(tt.in)
		if med != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("Median(%v) = %v (%v–%v), want %v (%v–%v)", tt.in, med, lo, hi, tt.med, tt.lo, tt.hi)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	a, err := ParseProcStat("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 0 0\nintr 1\n")
	if err != nil {
		t.Fatal(err)
	}
	// user nice system irq softirq steal = 100+5+50+3+2+10; idle+iowait = 820
	if a.Busy != 170 || a.Total != 990 {
		t.Fatalf("got %+v, want busy 170 total 990", a)
	}
	b := CPUTimes{Busy: a.Busy + 30, Total: a.Total + 120}
	if got := BusyShare(a, b); got != 0.25 {
		t.Fatalf("BusyShare = %v, want 0.25", got)
	}
	if got := BusyShare(a, a); got != 0 {
		t.Fatalf("BusyShare over no time = %v", got)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 x 3 4 5\n"} {
		if _, err := ParseProcStat(bad); err == nil {
			t.Errorf("ParseProcStat(%q) succeeded", bad)
		}
	}
}

func TestParsePidStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (par ley) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 123 45 0 0 20 0 12 0 100 1000 500 18446744073709551615\n"
	got, err := ParsePidStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 168 {
		t.Fatalf("utime+stime = %d, want 168", got)
	}
	for _, bad := range []string{"", "4242 parley S 1", "4242 (parley) S 1 2 3"} {
		if _, err := ParsePidStat(bad); err == nil {
			t.Errorf("ParsePidStat(%q) succeeded", bad)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	got, err := ParseVmRSS("Name:\tparley\nVmPeak:\t 1000 kB\nVmRSS:\t   19456 kB\nRssAnon:\t 3000 kB\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != 19456*1024 {
		t.Fatalf("VmRSS = %d", got)
	}
	for _, bad := range []string{"", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := ParseVmRSS(bad); err == nil {
			t.Errorf("ParseVmRSS(%q) succeeded", bad)
		}
	}
}

func TestParseRedisInfo(t *testing.T) {
	t.Parallel()
	info := "# Stats\r\ntotal_connections_received:3\r\ntotal_writes_processed:1234\r\n"
	got, err := ParseRedisInfo(info, "total_writes_processed")
	if err != nil || got != 1234 {
		t.Fatalf("got %d, %v", got, err)
	}
	if _, err := ParseRedisInfo(info, "missing_field"); err == nil {
		t.Fatal("a missing field parsed")
	}
}

func TestParseSmaps(t *testing.T) {
	t.Parallel()
	text := `00400000-01373000 r-xp 00000000 08:01 123 /usr/local/bin/parley
Size:              15820 kB
Rss:               11060 kB
Private_Clean:     11060 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
c000000000-c004000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:                4100 kB
Private_Clean:         0 kB
Private_Dirty:      4100 kB
Anonymous:          4100 kB
`
	ms, err := ParseSmaps(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0x1373000, Perms: "r-xp", Offset: 0, Path: "/usr/local/bin/parley", Rss: 11060 << 10, Private: 11060 << 10},
		{Start: 0xc000000000, End: 0xc004000000, Perms: "rw-p", Rss: 4100 << 10, Private: 4100 << 10, Anonymous: 4100 << 10},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("ParseSmaps = %+v, want %+v", ms, want)
	}
	if _, err := ParseSmaps("zz-00400000 r-xp 0 0 0 x\n"); err == nil {
		t.Error("a bad mapping line was accepted")
	}
}

// TestMeasureIdleSelf reads the test binary's own make-up: its code is
// running, so some of .text is resident, and no large section has more
// resident than its size rounded to pages (plus a shared boundary page).
func TestMeasureIdleSelf(t *testing.T) {
	t.Parallel()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := MeasureIdle(os.Getpid(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if mk.Binary[".text"][0] == 0 || mk.Anon == 0 || mk.VmRSS == 0 {
		t.Fatalf("make-up %+v: nothing resident", mk)
	}
	var file uint64
	for name, v := range mk.Binary {
		if name != ".bss" && name != ".noptrbss" {
			file += v[0]
		}
	}
	// Every resident page is in a window, and a window holds 16 pages
	// (a page two sections share is counted by both: a page a section).
	slack := uint64(len(mk.Binary)) * pageSize
	if mk.Windows == 0 || uint64(mk.Windows)*faultAround+slack < file || uint64(mk.Windows)*pageSize > file {
		t.Errorf("%d windows for %d bytes of the binary's pages", mk.Windows, file)
	}
	for _, name := range []string{".text", ".rodata", ".gopclntab"} {
		v := mk.Binary[name]
		if v[0] > (v[1]+2*pageSize)&^(pageSize-1)+pageSize {
			t.Errorf("%s: %d resident of %d", name, v[0], v[1])
		}
	}
}

func TestSymbolPackage(t *testing.T) {
	t.Parallel()
	for sym, want := range map[string]string{
		"runtime.mallocgc":       "runtime",
		"net/http.(*conn).serve": "net/http",
		"github.com/redis/go-redis/v9.(*baseClient).process": "github.com/redis/go-redis/v9",
		"slices.SortFunc[go.shape.string]":                   "slices",
		"go:buildid":                                         "go:buildid",
		"github.com/parleyhq/parley/channels/wechat.init.0":  "github.com/parleyhq/parley/channels/wechat",
	} {
		if got := symbolPackage(sym); got != want {
			t.Errorf("symbolPackage(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestParseRSS(t *testing.T) {
	t.Parallel()
	got, err := ParseRSS("Name:\tparley\nVmRSS:\t   19456 kB\nRssAnon:\t    7000 kB\nRssFile:\t   12456 kB\nRssShmem:\t       0 kB\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (RSS{Total: 19456 << 10, Anon: 7000 << 10, File: 12456 << 10}); got != want {
		t.Fatalf("ParseRSS = %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"VmRSS:\t12 kB\nRssFile:\t12 kB\n",                 // no RssAnon
		"VmRSS:\t12 kB\nRssAnon:\t1 kB\n",                  // no RssFile
		"VmRSS:\t12 kB\nRssAnon:\t1 MB\nRssFile:\t11 kB\n", // not kB
		"RssAnon:\t1 kB\nRssFile:\t11 kB\n",                // no VmRSS
	} {
		if _, err := ParseRSS(bad); err == nil {
			t.Errorf("ParseRSS(%q) succeeded", bad)
		}
	}
}

func TestParseRedisStats(t *testing.T) {
	t.Parallel()
	info := "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:5678\r\ninstantaneous_ops_per_sec:0\r\ntotal_writes_processed:1234\r\n"
	got, err := ParseRedisStats(info)
	if err != nil || got != (RedisStats{Writes: 1234, Commands: 5678}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := ParseRedisStats("# Stats\r\ntotal_writes_processed:1234\r\n"); err == nil {
		t.Fatal("an INFO without total_commands_processed parsed")
	}
}
