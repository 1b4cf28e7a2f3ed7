package bench

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Mapping is one mapping of /proc/PID/smaps with the sizes that say what
// its resident pages are (bytes).
type Mapping struct {
	Start, End uint64
	Perms      string
	Offset     uint64 // in the file
	Path       string // "" for an anonymous mapping
	Rss        uint64
	Private    uint64 // Private_Clean + Private_Dirty
	Anonymous  uint64
}

// ParseSmaps reads the text of /proc/PID/smaps.
func ParseSmaps(text string) ([]Mapping, error) {
	var ms []Mapping
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || len(f) < 5 {
				return nil, fmt.Errorf("smaps: mapping line %q", line)
			}
			off, err := strconv.ParseUint(f[2], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps: mapping line %q", line)
			}
			m := Mapping{Start: start, End: end, Perms: f[1], Offset: off}
			if len(f) >= 6 {
				m.Path = strings.Join(f[5:], " ")
			}
			ms = append(ms, m)
			continue
		}
		if len(ms) == 0 || len(f) != 3 || f[2] != "kB" {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: %q: %w", line, err)
		}
		m := &ms[len(ms)-1]
		switch f[0] {
		case "Rss:":
			m.Rss = n << 10
		case "Private_Clean:", "Private_Dirty:":
			m.Private += n << 10
		case "Anonymous:":
			m.Anonymous = n << 10
		}
	}
	return ms, sc.Err()
}

// IdleMakeup is what one idle `parley serve`'s resident memory is made of.
type IdleMakeup struct {
	VmRSS uint64
	// RssAnon and RssFile are /proc/PID/status's split of VmRSS into
	// anonymous and file-backed pages.
	RssAnon, RssFile uint64
	// Binary is the executable's resident pages by ELF section (.text,
	// .rodata, .gopclntab, .data, …; .bss and .noptrbss are the part of
	// the writable segment past the file), counted page by page with
	// /proc/PID/pagemap: [0] resident, [1] the section's size.
	Binary map[string][2]uint64
	// Windows is how many of the 64 KiB-aligned windows of the binary's
	// file-backed pages have a page resident. The kernel maps a whole
	// window of a file already in the page cache for one page touched
	// (fault-around, /sys/kernel/debug/fault_around_bytes): Windows is
	// at least the number of places touched, and Windows × 64 KiB close
	// to the binary's resident pages says RSS is what fault-around
	// mapped, not what was read.
	Windows int
	// Packages is the resident .text windows shared out among the
	// packages whose functions lie in each, by bytes of code: which
	// packages' code start-up touched (a window holding code of three
	// packages counts a third to each).
	Packages map[string]float64
	// Anon is the resident anonymous memory outside the binary's
	// sections: the Go heap, goroutine stacks and the runtime's own
	// structures (and [stack], the main thread's).
	Anon uint64
	// Other is what is left: vdso, vvar and other files.
	Other uint64
	// Runtime is a few of the Go runtime's own figures, read from
	// /metrics after the maps (the scrape itself moves RSS a little).
	Runtime map[string]float64
}

// pageSize is the size pagemap counts in; smaps says kB anyway.
const pageSize = 4096

// faultAround is the kernel's default fault-around window.
const faultAround = 64 << 10

// residentPages counts the pages of [start, end) present in memory, from
// /proc/PID/pagemap (bit 63 of each page's 64-bit entry), and adds the
// fault-around windows holding one to windows.
func residentPages(pm io.ReaderAt, start, end uint64, windows map[uint64]bool) (uint64, error) {
	start &^= pageSize - 1
	n := (end - start + pageSize - 1) / pageSize
	buf := make([]byte, n*8)
	if _, err := pm.ReadAt(buf, int64(start/pageSize*8)); err != nil && err != io.EOF {
		return 0, err
	}
	var present uint64
	for i := uint64(0); i < n; i++ {
		if binary.LittleEndian.Uint64(buf[i*8:])&(1<<63) != 0 {
			present++
			windows[(start+i*pageSize)/faultAround] = true
		}
	}
	return present * pageSize, nil
}

// MeasureIdle reads the make-up of process pid, whose executable is bin.
// pagemap shows the present bit to the process's own user (only the frame
// numbers need privileges), so no root is needed.
func MeasureIdle(pid int, bin string) (IdleMakeup, error) {
	var mk IdleMakeup
	rss, err := ParseRSS(readFile(fmt.Sprintf("/proc/%d/status", pid)))
	if err != nil {
		return mk, err
	}
	mk.VmRSS, mk.RssAnon, mk.RssFile = rss.Total, rss.Anon, rss.File
	maps, err := ParseSmaps(readFile(fmt.Sprintf("/proc/%d/smaps", pid)))
	if err != nil {
		return mk, err
	}
	ef, err := elf.Open(bin)
	if err != nil {
		return mk, err
	}
	defer ef.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return mk, err
	}
	defer pm.Close()
	// A position-independent binary is loaded at an offset: the start of
	// its mapping at file offset 0 less its first segment's address.
	var bias uint64
	if ef.Type == elf.ET_DYN {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		for _, m := range maps {
			if m.Path == exe && m.Offset == 0 {
				bias = m.Start
				break
			}
		}
	}
	mk.Binary = map[string][2]uint64{}
	windows := map[uint64]bool{}
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 {
			continue
		}
		w := windows
		if s.Type == elf.SHT_NOBITS {
			w = map[uint64]bool{} // .bss: anonymous, never faulted around
		}
		res, err := residentPages(pm, bias+s.Addr, bias+s.Addr+s.Size, w)
		if err != nil {
			return mk, fmt.Errorf("pagemap: %w", err)
		}
		name := s.Name
		if strings.HasPrefix(name, ".note") || strings.HasPrefix(name, ".go.") {
			name = ".note, .go.*"
		}
		v := mk.Binary[name]
		v[0] += res
		v[1] += s.Size
		mk.Binary[name] = v
	}
	mk.Windows = len(windows)
	if text := ef.Section(".text"); text != nil {
		mk.Packages = packageWindows(ef, bias, bias+text.Addr, bias+text.Addr+text.Size, windows)
	}
	// Two sections sharing a page both count it: at most a page a
	// boundary, a few dozen KiB in all.
	lo, hi := ^uint64(0), uint64(0)
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			lo, hi = min(lo, bias+p.Vaddr), max(hi, bias+p.Vaddr+p.Memsz)
		}
	}
	for _, m := range maps {
		switch {
		case m.Start >= lo && m.End <= (hi+pageSize-1)&^(pageSize-1):
			// the binary's segments (and its .bss, anonymous): counted above
		case m.Path == "" || m.Path == "[heap]" || m.Path == "[stack]":
			mk.Anon += m.Rss
		default:
			mk.Other += m.Rss
		}
	}
	return mk, nil
}

// packageWindows shares out each resident window of [lo, hi) among the
// packages whose function symbols overlap it, by bytes.
func packageWindows(ef *elf.File, bias, lo, hi uint64, windows map[uint64]bool) map[string]float64 {
	syms, err := ef.Symbols()
	if err != nil {
		return nil
	}
	type fn struct {
		start, end uint64
		pkg        string
	}
	var fns []fn
	for _, s := range syms {
		a := bias + s.Value
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || a < lo || a >= hi {
			continue
		}
		fns = append(fns, fn{a, a + s.Size, symbolPackage(s.Name)})
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].start < fns[j].start })
	out := map[string]float64{}
	for w := range windows {
		ws, we := w*faultAround, (w+1)*faultAround
		if we <= lo || ws >= hi {
			continue
		}
		i := sort.Search(len(fns), func(i int) bool { return fns[i].end > ws })
		share := map[string]uint64{}
		var total uint64
		for ; i < len(fns) && fns[i].start < we; i++ {
			n := min(fns[i].end, we) - max(fns[i].start, ws)
			share[fns[i].pkg] += n
			total += n
		}
		for pkg, n := range share {
			out[pkg] += float64(n) / float64(total)
		}
	}
	return out
}

// symbolPackage is the import path of a Go symbol: "net/http" for
// "net/http.(*conn).serve", "runtime" for "runtime.mallocgc".
func symbolPackage(name string) string {
	slash := strings.LastIndexByte(name, '/') + 1
	if dot := strings.IndexByte(name[slash:], '.'); dot >= 0 {
		return name[:slash+dot]
	}
	return name
}

// runtimeFigures scrapes a few of the Go collector's gauges from /metrics.
func runtimeFigures(ctx context.Context, base string) map[string]float64 {
	want := []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
		"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines", "go_threads"}
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		for _, w := range want {
			if f[0] == w {
				if v, err := strconv.ParseFloat(f[1], 64); err == nil {
					out[w] = v
				}
			}
		}
	}
	return out
}

// Idle starts n `parley serve`s in turn, each against a fresh Redis and
// the fakes, and prints what each one's resident memory is made of one
// second after it is ready (the moment the runs' "idle RSS" is read).
func Idle(ctx context.Context, o Options, n int, out io.Writer) error {
	for i := 1; i <= n; i++ {
		mk, err := idleOnce(ctx, o)
		if err != nil {
			return err
		}
		printIdle(out, i, mk)
	}
	return nil
}

func idleOnce(ctx context.Context, o Options) (IdleMakeup, error) {
	dir, err := os.MkdirTemp("", "parley-bench-")
	if err != nil {
		return IdleMakeup{}, err
	}
	defer os.RemoveAll(dir)
	rds, err := startRedis(ctx, dir, o.redisFsync())
	if err != nil {
		return IdleMakeup{}, err
	}
	defer func() { rds.stop() }()
	model, err := startUpstream(http.HandlerFunc(echoModel))
	if err != nil {
		return IdleMakeup{}, err
	}
	defer model.Close()
	slack, err := startUpstream(newFakeSlack())
	if err != nil {
		return IdleMakeup{}, err
	}
	defer slack.Close()
	p, err := startParley(ctx, o.Parley, dir, rds, model, slack, nil)
	if err != nil {
		return IdleMakeup{}, err
	}
	defer p.stop()
	time.Sleep(time.Second)
	mk, err := MeasureIdle(p.pid(), o.Parley)
	if err != nil {
		return mk, err
	}
	mk.Runtime = runtimeFigures(ctx, p.base)
	return mk, nil
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 2, 64) }

func printIdle(out io.Writer, i int, mk IdleMakeup) {
	var bin uint64
	names := make([]string, 0, len(mk.Binary))
	for name, v := range mk.Binary {
		bin += v[0]
		names = append(names, name)
	}
	sort.Slice(names, func(a, b int) bool { return mk.Binary[names[a]][0] > mk.Binary[names[b]][0] })
	fmt.Fprintf(out, "idle %d: VmRSS %s MiB (RssAnon %s, RssFile %s): the binary's pages %s, anonymous %s, other %s\n",
		i, mib(mk.VmRSS), mib(mk.RssAnon), mib(mk.RssFile), mib(bin), mib(mk.Anon), mib(mk.Other))
	var rest [2]uint64
	for _, name := range names {
		v := mk.Binary[name]
		if v[0] < 64<<10 {
			rest[0], rest[1] = rest[0]+v[0], rest[1]+v[1]
			continue
		}
		fmt.Fprintf(out, "  %-14s %6s of %6s MiB resident\n", name, mib(v[0]), mib(v[1]))
	}
	fmt.Fprintf(out, "  %-14s %6s of %6s MiB resident\n", "other sections", mib(rest[0]), mib(rest[1]))
	fmt.Fprintf(out, "  the binary's resident pages lie in %d windows of 64 KiB (%s MiB): what fault-around maps for a page touched in each\n",
		mk.Windows, mib(uint64(mk.Windows)*faultAround))
	pkgs := make([]string, 0, len(mk.Packages))
	for pkg := range mk.Packages {
		pkgs = append(pkgs, pkg)
	}
	sort.Slice(pkgs, func(a, b int) bool {
		if x, y := mk.Packages[pkgs[a]], mk.Packages[pkgs[b]]; x != y {
			return x > y
		}
		return pkgs[a] < pkgs[b] // ties in a steady order, run to run
	})
	if len(pkgs) > 0 {
		fmt.Fprintf(out, "  .text windows by package (a window shared by bytes of code):")
		for i, pkg := range pkgs[:min(len(pkgs), 20)] {
			if i%4 == 0 {
				fmt.Fprintf(out, "\n   ")
			}
			fmt.Fprintf(out, " %s %.1f", pkg, mk.Packages[pkg])
		}
		fmt.Fprintln(out)
	}
	r := mk.Runtime
	if len(r) > 0 {
		fmt.Fprintf(out, "  Go runtime (/metrics, read after): heap in use %s MiB, heap idle %s (released %s), stacks %s, sys %s; %.0f goroutines, %.0f threads\n",
			mib(uint64(r["go_memstats_heap_inuse_bytes"])), mib(uint64(r["go_memstats_heap_idle_bytes"])),
			mib(uint64(r["go_memstats_heap_released_bytes"])), mib(uint64(r["go_memstats_stack_inuse_bytes"])),
			mib(uint64(r["go_memstats_sys_bytes"])), r["go_goroutines"], r["go_threads"])
	}
}
