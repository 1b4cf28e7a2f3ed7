package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// TestFetchArticleAsMarkdown converts a saved blog page — navigation, a
// cookie banner, ads, a sidebar, comments and a footer around the article —
// and checks that the model gets the article, its structure and its links,
// and none of the rest.
func TestFetchArticleAsMarkdown(t *testing.T) {
	page, err := os.ReadFile("testdata/article.html")
	if err != nil {
		t.Fatal(err)
	}
	h := newFetchHarness(t, FetchConfig{})
	h.net.name("blog.harbor.example", publicIP)
	h.net.serve(t, publicIP, text("text/html; charset=utf-8", string(page)))

	got, err := h.fetch(t, "http://blog.harbor.example/2025/03/queue-slower-with-more-workers", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got,
		"Source: http://blog.harbor.example/2025/03/queue-slower-with-more-workers\n",
		"text/html, converted to Markdown",
		"# Why our queue got slower when we added workers\n",
		"By Mara Lindqvist, published 2025-03-14",
		"## The symptoms", "## The fix", "## Lessons",
		"The **median** latency barely moved, and the *99th percentile* got worse",
		"- CPU on the worker nodes at only 35 % — far from saturated;",
		"1. Workers lease batches of 20 jobs",
		"> If your queue depth and your throughput disagree",
		"| 48 ", "| 2,910 ",
		"```\nUPDATE jobs SET leased_by",
		"FOR UPDATE SKIP LOCKED",
		"`L = λW`",
		"陈伟",
		// Links are kept, relative ones made absolute.
		"[Little's law](http://blog.harbor.example/2024/11/little-law-in-practice)",
		"[the locking clause](https://www.postgresql.org/docs/current/sql-select.html#SQL-FOR-UPDATE-SHARE)",
		"![Flame graph: 58 percent of worker time inside acquire_lease](http://blog.harbor.example/images/2025/03/flamegraph.png)",
	)
	mustNotContain(t, got,
		"cookies", "Sign in", "Subscribe", "Careers", // banner and navigation
		"Advertisement", "Sponsored", "CloudWidget", "QueueMaster", // ads
		"Related posts", "Get the newsletter", "Popular tags", // sidebar
		"Why not just use Kafka", "Leave a comment", // comments
		"Privacy policy", "© 2025", // footer
		"TRACKING-ID", "dataLayer", "querySelectorAll", "schema.org", // scripts
		"data:image", "javascript:", "<div", "<p>",
	)
	if strings.Contains(got, "more bytes follow") {
		t.Errorf("a %d-byte article should fit one page", len(got))
	}
}

// TestFetchWholeBodyWhenNoArticle: a short page with no article-like block
// is converted whole, without its navigation and scripts.
// TestFetchRealWorldPage reads a page as a real site served it: the
// Wikipedia article "Mozilla" (CC BY-SA, from Mozilla Readability's test
// corpus as shipped with go-readability v2.1.3, testdata/README.md), with
// MediaWiki's navigation, tools and footer around the article. Read page
// by page with the offsets it hands out, the model gets the article with
// its sections, lists, quotes and absolute links, and none of the site's
// chrome.
func TestFetchRealWorldPage(t *testing.T) {
	page, err := os.ReadFile("testdata/wikipedia-mozilla.html")
	if err != nil {
		t.Fatal(err)
	}
	h := newFetchHarness(t, FetchConfig{})
	h.net.name("en.wikipedia.org", publicIP)
	h.net.serve(t, publicIP, text("text/html; charset=UTF-8", string(page)))
	const url = "http://en.wikipedia.org/wiki/Mozilla"
	nextRE := regexp.MustCompile(`call web_fetch with url="[^"]+" and offset=(\d+) to read on`)

	var all strings.Builder
	pages := 0
	for offset := 0; ; {
		if pages++; pages > 10 {
			t.Fatal("more than 10 pages: the offsets do not advance")
		}
		got, err := h.fetch(t, url, offset)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("page at %d is not valid UTF-8", offset)
		}
		all.WriteString(got)
		m := nextRE.FindStringSubmatch(got)
		if m == nil {
			break
		}
		offset, _ = strconv.Atoi(m[1])
	}
	md := all.String()
	if pages < 3 {
		t.Errorf("%d page(s) for the %d-byte page; want the article in several", pages, len(page))
	}
	mustContain(t, md,
		"Content: text/html, converted to Markdown",
		"**Mozilla** is a [free-software](http://en.wikipedia.org/wiki/Free_software",
		"## History", "## Software", "## External links",
		"> - Build and enable open-source technologies and communities",
		"- [Mozilla Foundation](http://en.wikipedia.org/wiki/Mozilla_Foundation")
	for _, chrome := range []string{"Navigation menu", "Personal tools", "Create account", "Random article",
		"What links here", "Privacy policy", "This page was last modified", "Jump to", "<div", "<span"} {
		if strings.Contains(md, chrome) {
			t.Errorf("the Markdown holds %q, which is the site's, not the article's", chrome)
		}
	}
}

func TestFetchWholeBodyWhenNoArticle(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	h.net.serve(t, publicIP, text("text/html", `<html><head><title>Status</title><script>var x = "SCRIPT";</script></head>
<body><nav><a href="/">Home</a></nav><h1>All systems normal</h1><p>See the <a href="/history">incident history</a>.</p><footer>FOOTER</footer></body></html>`))
	got, err := h.fetch(t, "http://"+publicIP+"/status", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "# All systems normal", "[incident history](http://93.184.215.14/history)")
	mustNotContain(t, got, "SCRIPT", "FOOTER", "Home")
}

// TestFetchPagesWithOffset reads a long document page by page, following
// the offsets the pages give, and gets it back byte for byte, with every
// page within the limit and whole characters only.
func TestFetchPagesWithOffset(t *testing.T) {
	var doc strings.Builder
	for i := 0; doc.Len() < 70_000; i++ {
		fmt.Fprintf(&doc, "第%d行：数据与文字 — line %d of a long plain document, with é and 🙂.\n", i, i)
	}
	// A very long line too, so that some cuts fall inside a line.
	doc.WriteString(strings.Repeat("长", 9000) + "\n")
	want := doc.String()

	h := newFetchHarness(t, FetchConfig{})
	h.net.serve(t, publicIP, text("text/plain; charset=utf-8", want))
	url := "http://" + publicIP + "/long.txt"
	nextRE := regexp.MustCompile(`call web_fetch with url="([^"]+)" and offset=(\d+) to read on`)
	rangeRE := regexp.MustCompile(`this page holds bytes (\d+)-(\d+)\.\n\n`)

	var got strings.Builder
	offset, pages := 0, 0
	for {
		res, err := h.fetch(t, url, offset)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if !utf8.ValidString(res) {
			t.Fatalf("page at %d is not valid UTF-8", offset)
		}
		m := rangeRE.FindStringSubmatchIndex(res)
		if m == nil {
			t.Fatalf("no range line in page at %d:\n%.300s", offset, res)
		}
		from, _ := strconv.Atoi(res[m[2]:m[3]])
		to, _ := strconv.Atoi(res[m[4]:m[5]])
		if from != offset {
			t.Fatalf("page asked at %d starts at %d", offset, from)
		}
		body := res[m[1]:]
		next := nextRE.FindStringSubmatch(body)
		if next != nil {
			body = body[:strings.LastIndex(body, "\n\n[")]
			if next[1] != url {
				t.Errorf("footer names %q, want %q", next[1], url)
			}
		}
		if len(body) != to-from {
			t.Fatalf("page %d-%d holds %d bytes", from, to, len(body))
		}
		got.WriteString(body)
		if next == nil {
			break
		}
		offset, _ = strconv.Atoi(next[2])
		if offset != to {
			t.Fatalf("next offset %d, page ended at %d", offset, to)
		}
	}
	if got.String() != want {
		t.Fatalf("pages do not add up to the document: got %d bytes, want %d", got.Len(), len(want))
	}
	if pages < 5 {
		t.Errorf("%d pages for %d bytes", pages, len(want))
	}

	// An offset inside a character moves to the next whole one.
	i := strings.Index(want, "数") + 1
	res, err := h.fetch(t, url, i)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res, fmt.Sprintf("this page holds bytes %d-", i+2), "\n\n据与文字")

	if _, err := h.fetch(t, url, len(want)); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("offset at the end: %v", err)
	}
	if _, err := h.fetch(t, url, -1); err == nil {
		t.Error("a negative offset was accepted")
	}
}

func TestFetchPassesTextThrough(t *testing.T) {
	cases := []struct{ contentType, body string }{
		{"application/json", `{"name":"parley","tags":["go","chat"]}`},
		{"application/vnd.github+json; charset=utf-8", `{"id":1}`},
		{"text/markdown", "# Title\n\n- item <b>not html</b>\n"},
		{"text/plain", "<p>declared plain, so shown as written</p>"},
		{"application/xml", `<?xml version="1.0"?><feed><title>x</title></feed>`},
		{"", "no content type, plain words"},
	}
	h := newFetchHarness(t, FetchConfig{})
	var mu sync.Mutex
	current := ""
	ctype := ""
	h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header()["Content-Type"] = []string{ctype}
		_, _ = w.Write([]byte(current))
	}))
	for _, c := range cases {
		mu.Lock()
		current, ctype = c.body, c.contentType
		mu.Unlock()
		got, err := h.fetch(t, "http://"+publicIP+"/doc", 0)
		if err != nil {
			t.Errorf("%s: %v", c.contentType, err)
			continue
		}
		if !strings.HasSuffix(got, "\n\n"+c.body) {
			t.Errorf("%s: body not passed through:\n%s", c.contentType, got)
		}
	}
}

// TestFetchDecodesLegacyCharsets: a GBK page, as many Chinese sites still
// serve, reaches the model as UTF-8.
func TestFetchDecodesLegacyCharsets(t *testing.T) {
	page := `<html><head><title>公告</title></head><body><article><h1>系统维护公告</h1><p>` +
		strings.Repeat("本周六凌晨两点到四点进行数据库升级，期间服务暂停。", 12) + `</p></article></body></html>`
	gbk, err := simplifiedchinese.GBK.NewEncoder().String(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{"text/html; charset=gbk", "text/html"} {
		body := gbk
		if ct == "text/html" { // the charset comes from the page itself
			body = strings.Replace(gbk, "<head>", `<head><meta charset="gbk">`, 1)
		}
		h := newFetchHarness(t, FetchConfig{})
		h.net.serve(t, publicIP, text(ct, body))
		got, err := h.fetch(t, "http://"+publicIP+"/notice", 0)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, got, "系统维护公告", "本周六凌晨两点到四点进行数据库升级")
	}
}

func TestFetchRefusesNonText(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
	cases := []struct{ name, contentType, body, want string }{
		{"declared image", "image/png", png, "the server sent image/png"},
		{"image declared as HTML", "text/html", png, "looks like image/png (the server said text/html)"},
		{"pdf", "application/pdf", "%PDF-1.7\n%âãÏÓ\n", "the server sent application/pdf"},
		{"binary declared as text", "text/plain", "\x00\x01\x02\x03binary\x00\x00", "looks like application/octet-stream"},
		{"binary without a type", "", "PK\x03\x04\x14\x00\x00\x00\x08\x00", "looks like application/zip"},
		{"octet-stream", "application/octet-stream", "just words", "the server sent application/octet-stream"},
		{"video", "video/mp4", "....ftypisom", "the server sent video/mp4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newFetchHarness(t, FetchConfig{})
			h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = []string{c.contentType}
				_, _ = w.Write([]byte(c.body))
			}))
			_, err := h.fetch(t, "http://"+publicIP+"/file", 0)
			if err == nil || !strings.Contains(err.Error(), "not a text document") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a refusal containing %q", err, c.want)
			}
		})
	}
}

// TestFetchCapsTheDownload: a body over max_bytes is cut there and the page
// says so.
func TestFetchCapsTheDownload(t *testing.T) {
	const capBytes = 10 << 10
	h := newFetchHarness(t, FetchConfig{MaxBytes: capBytes})
	h.net.serve(t, publicIP, text("text/plain", strings.Repeat("0123456789abcdé\n", 20_000)))
	got, err := h.fetch(t, "http://"+publicIP+"/big", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, fmt.Sprintf("only its first %d bytes were read", capBytes))
	total := regexp.MustCompile(`, (\d+) bytes; this page`).FindStringSubmatch(got)
	if n, _ := strconv.Atoi(total[1]); n > capBytes || n < capBytes-4 {
		t.Errorf("document of %d bytes after a %d-byte cap", n, capBytes)
	}
}

// TestFetchCutsAGzipBomb: 64 MiB of text compressed to a few hundred KiB.
// The cap counts decompressed bytes, so the fetch stops at max_bytes
// instead of inflating the whole bomb.
func TestFetchCutsAGzipBomb(t *testing.T) {
	// One gzip member of 1 MiB, repeated: gzip readers read concatenated
	// members as one stream, and compressing 1 MiB is quicker than 64.
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	_, _ = zw.Write([]byte(strings.Repeat("All work and no play makes Jack a dull boy.\n", (1<<20)/44)))
	_ = zw.Close()
	bomb := bytes.NewBuffer(bytes.Repeat(member.Bytes(), 64))
	const capBytes = 1 << 20
	if bomb.Len() >= capBytes {
		t.Fatalf("the bomb is %d bytes compressed; it must be smaller than the cap to prove anything", bomb.Len())
	}
	h := newFetchHarness(t, FetchConfig{MaxBytes: capBytes})
	h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb.Bytes())
	}))
	got, err := h.fetch(t, "http://"+publicIP+"/bomb", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, fmt.Sprintf("only its first %d bytes were read", capBytes), "All work and no play")
}

func TestFetchTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := map[string]http.HandlerFunc{
		"no headers": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
		"slow body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("first bytes…"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
	}
	for name, handler := range cases {
		t.Run(name, func(t *testing.T) {
			h := newFetchHarness(t, FetchConfig{Timeout: 200 * time.Millisecond})
			h.net.serve(t, publicIP, handler)
			_, err := h.fetch(t, "http://"+publicIP+"/slow", 0)
			if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want a timeout the agent counts as one", err)
			}
		})
	}
}

func TestFetchFollowsAtMostFiveRedirects(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	h.net.name("hops.example", publicIP)
	h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /hop/N/M redirects until N reaches M, then serves the page.
		var n, m int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d/%d", &n, &m); err != nil {
			http.NotFound(w, r)
			return
		}
		if n < m {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d/%d", n+1, m), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "arrived after %d redirects", n)
	}))
	got, err := h.fetch(t, "http://hops.example/hop/0/5", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "arrived after 5 redirects", "Source: http://hops.example/hop/5/5\n")
	if _, err := h.fetch(t, "http://hops.example/hop/0/6", 0); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Errorf("six redirects: %v", err)
	}
}

func TestFetchReportsHTTPErrors(t *testing.T) {
	cases := map[int]string{
		http.StatusNotFound:            "answered HTTP 404 Not Found (no such page)",
		http.StatusForbidden:           "answered HTTP 403 Forbidden (the site wants a login or refuses automated readers)",
		http.StatusTooManyRequests:     "rate limiting",
		http.StatusInternalServerError: "answered HTTP 500 Internal Server Error",
	}
	for status, want := range cases {
		h := newFetchHarness(t, FetchConfig{})
		h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte("error page body"))
		}))
		_, err := h.fetch(t, "http://"+publicIP+"/x", 0)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "error page body") {
			t.Errorf("%d: got %v, want %q", status, err, want)
		}
	}
}

func TestFetchUnknownHost(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	_, err := h.fetch(t, "http://no-such-host.example/", 0)
	if err == nil || !strings.Contains(err.Error(), "no such host: no-such-host.example") {
		t.Errorf("got %v", err)
	}
}

// TestFetchIgnoresProxyEnvironment: a proxy would connect to addresses the
// guard never checked, so the transport has none, whatever HTTP_PROXY says.
func TestFetchIgnoresProxyEnvironment(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	tr, ok := h.tool.client.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatal("web_fetch's transport must not use a proxy")
	}
	if tr.DialContext == nil {
		t.Fatal("web_fetch's transport must dial through the guard")
	}
}

// TestFetchConcurrentCalls: the agent runs read tools of one batch in
// parallel; the tool must be safe for that (run with -race).
func TestFetchConcurrentCalls(t *testing.T) {
	page, _ := os.ReadFile("testdata/article.html")
	h := newFetchHarness(t, FetchConfig{})
	h.net.serve(t, publicIP, text("text/html", string(page)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := h.fetch(t, "http://"+publicIP+"/post", 0)
			if err != nil || !strings.Contains(got, "## The fix") {
				t.Errorf("concurrent fetch: %v", err)
			}
		})
	}
	wg.Wait()
}

// TestFetchHTTPSVerifiesTheName: the connection goes to the checked
// address, while TLS still verifies the certificate against the URL's name.
func TestFetchHTTPSVerifiesTheName(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	srv := httptest.NewTLSServer(text("text/plain", "over TLS"))
	t.Cleanup(srv.Close)
	h.net.mu.Lock()
	h.net.routes[netip.MustParseAddr(publicIP)] = srv.Listener.Addr().String()
	h.net.mu.Unlock()
	// Trust the test server's certificate, which is issued to example.com.
	h.tool.client.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	h.net.name("example.com", publicIP)
	h.net.name("other.example", publicIP)

	got, err := h.fetch(t, "https://example.com/secure", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "over TLS", "Source: https://example.com/secure")
	if _, err := h.fetch(t, "https://other.example/secure", 0); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a certificate for another name was accepted: %v", err)
	}
}

func TestFetchRefusesHugeHeaders(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range 40 {
			w.Header().Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("x", 4000))
		}
		_, _ = w.Write([]byte("body"))
	}))
	if _, err := h.fetch(t, "http://"+publicIP+"/", 0); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("160 KB of headers: %v", err)
	}
}
