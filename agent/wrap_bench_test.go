package agent

import (
	"strings"
	"testing"
)

// BenchmarkWrapToolResult measures the envelope on a 16 KiB page (a
// web_fetch page) of ordinary text with markup and links, and on one
// crafted to make the look-alike scan work hardest (every byte starts a
// character reference that is none).
func BenchmarkWrapToolResult(b *testing.B) {
	page := strings.Repeat("Parley reads <b>pages</b> as Markdown: [link](https://x.test/?a=1&b=2) — 工具结果 &amp; more.\n", 200)[:16<<10]
	hostile := strings.Repeat("&abcdefghijklmnopqrstuvwxyz01234", 512)
	for _, bb := range []struct{ name, s string }{{"page", page}, {"hostile", hostile}} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.s)))
			b.ReportAllocs()
			for b.Loop() {
				WrapToolResult("web_fetch", bb.s)
			}
		})
	}
}
