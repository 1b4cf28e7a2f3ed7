package web

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
)

// BenchmarkHTMLToMarkdown measures the conversion web_fetch runs on every
// HTML page: parsing, readability's main-content search and the Markdown
// writer, on the saved blog page. docs/tools.md quotes its figures.
func BenchmarkHTMLToMarkdown(b *testing.B) {
	page, err := os.ReadFile("testdata/article.html")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkConvert(b, string(page))
}

// BenchmarkHTMLToMarkdownLarge is the same page with its article repeated
// to about 1 MiB: what a long documentation page costs.
func BenchmarkHTMLToMarkdownLarge(b *testing.B) {
	page, err := os.ReadFile("testdata/article.html")
	if err != nil {
		b.Fatal(err)
	}
	s := string(page)
	start, end := strings.Index(s, `<div class="post-content">`), strings.Index(s, `<div class="share-buttons">`)
	body := s[start:end]
	big := s[:start] + strings.Repeat(body, (1<<20)/len(body)) + s[end:]
	benchmarkConvert(b, big)
}

// BenchmarkHTMLToMarkdownWikipedia converts a page as a real site serves
// it: a Wikipedia article of 244 KB, most of it MediaWiki's markup.
func BenchmarkHTMLToMarkdownWikipedia(b *testing.B) {
	page, err := os.ReadFile("testdata/wikipedia-mozilla.html")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkConvert(b, string(page))
}

func benchmarkConvert(b *testing.B, page string) {
	r := newRenderer()
	u, _ := url.Parse("https://blog.harbor.example/2025/03/queue-slower-with-more-workers")
	doc := document{url: u, mediaType: "text/html", html: true, body: page}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	var out int
	for b.Loop() {
		md, err := r.document(context.Background(), doc)
		if err != nil {
			b.Fatal(err)
		}
		out = len(md)
	}
	b.ReportMetric(float64(out), "markdown-bytes")
}
