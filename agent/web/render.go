package web

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	readability "codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// minArticleText is the least text readability's pick must hold to be
// trusted as the page's main content; below it (a listing, a landing page,
// a short note) the whole body is converted instead.
const minArticleText = 200

// maxReadabilityElems bounds the pages readability scores: it walks the
// tree many times, so a page with more elements is converted whole instead.
const maxReadabilityElems = 30000

// renderer turns fetched documents into the text the model reads. HTML goes
// through readability (Mozilla's Readability.js algorithm: the article
// without navigation, sidebars, footers and ads) and then html-to-markdown;
// other text passes through.
type renderer struct {
	conv *converter.Converter
}

func newRenderer() *renderer {
	return &renderer{conv: converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))}
}

// document returns the readable text of doc, with a title line for HTML.
func (r *renderer) document(ctx context.Context, doc document) (string, error) {
	if !doc.html {
		return doc.body, nil
	}
	p, err := r.html(ctx, doc.body, doc.url)
	if err != nil {
		return "", fmt.Errorf("converting %s to Markdown: %w", doc.url.Redacted(), err)
	}
	var b strings.Builder
	if p.title != "" && !strings.HasPrefix(p.markdown, "# ") {
		b.WriteString("# " + p.title + "\n\n")
	}
	if p.byline != "" {
		b.WriteString(p.byline + "\n\n")
	}
	b.WriteString(p.markdown)
	return b.String(), nil
}

// page is a converted HTML page.
type page struct {
	title    string
	byline   string // author and date, when the page names them
	markdown string
}

// html converts an HTML page to Markdown: the main content when
// readability finds one, the whole body otherwise.
func (r *renderer) html(ctx context.Context, source string, base *url.URL) (page, error) {
	doc, err := html.Parse(strings.NewReader(source))
	if err != nil {
		return page{}, err
	}
	var (
		p    page
		node *html.Node
	)
	parser := readability.NewParser()
	parser.MaxElemsToParse = maxReadabilityElems
	// Readability works on the tree in place; the rare fallback parses the
	// page again rather than every page paying for a copy.
	if article, err := parser.ParseAndMutate(doc, base); err == nil && article.Node != nil &&
		len(strings.TrimSpace(textOf(article.Node))) >= minArticleText {
		node, p.title, p.byline = article.Node, article.Title(), byline(article)
	} else {
		if doc, err = html.Parse(strings.NewReader(source)); err != nil {
			return page{}, err
		}
		node, p.title = stripClutter(doc), documentTitle(doc)
	}
	sanitize(node)
	out, err := r.conv.ConvertNode(node, converter.WithDomain(base.String()), converter.WithContext(ctx))
	if err != nil {
		return page{}, err
	}
	p.title, p.markdown = oneLine(p.title), tidy(out)
	return p, nil
}

// byline is "By AUTHOR, DATE" from the page's metadata, for citing it.
func byline(a readability.Article) string {
	var parts []string
	if by := oneLine(a.Byline()); by != "" {
		parts = append(parts, "By "+strings.TrimPrefix(by, "By "))
	}
	if t, err := a.PublishedTime(); err == nil {
		parts = append(parts, "published "+t.Format("2006-01-02"))
	}
	return strings.Join(parts, ", ")
}

// clutter are elements a reader never needs in the fallback conversion.
var clutter = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Nav: true, atom.Header: true, atom.Footer: true, atom.Aside: true,
	atom.Form: true, atom.Iframe: true, atom.Svg: true, atom.Canvas: true,
	atom.Button: true, atom.Select: true, atom.Object: true, atom.Embed: true,
}

// stripClutter removes navigation, scripts and forms from doc and returns
// its body (or doc itself when there is none).
func stripClutter(doc *html.Node) *html.Node {
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			if c.Type == html.ElementNode && clutter[c.DataAtom] {
				n.RemoveChild(c)
			} else {
				walk(c)
			}
			c = next
		}
	}
	walk(doc)
	if b := find(doc, atom.Body); b != nil {
		return b
	}
	return doc
}

// sanitize drops what would only cost the model bytes or mislead it:
// images inlined as data: URLs (kept as their alt text) and javascript:
// links (kept as their text).
func sanitize(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			switch c.DataAtom {
			case atom.Img:
				if src := strings.ToLower(strings.TrimSpace(attr(c, "src"))); strings.HasPrefix(src, "data:") || strings.HasPrefix(src, "blob:") {
					n.InsertBefore(&html.Node{Type: html.TextNode, Data: attr(c, "alt")}, c)
					n.RemoveChild(c)
				}
			case atom.A:
				if href := strings.ToLower(strings.TrimSpace(attr(c, "href"))); strings.HasPrefix(href, "javascript:") || strings.HasPrefix(href, "data:") {
					removeAttr(c, "href")
				}
			}
			sanitize(c)
		}
		c = next
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

func removeAttr(n *html.Node, key string) {
	kept := n.Attr[:0]
	for _, a := range n.Attr {
		if a.Key != key {
			kept = append(kept, a)
		}
	}
	n.Attr = kept
}

func find(n *html.Node, a atom.Atom) *html.Node {
	if n.Type == html.ElementNode && n.DataAtom == a {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, a); f != nil {
			return f
		}
	}
	return nil
}

func documentTitle(doc *html.Node) string {
	if t := find(doc, atom.Title); t != nil {
		return textOf(t)
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var blankRuns = regexp.MustCompile(`\n{3,}`)

// tidy trims the converter's output and folds runs of blank lines, which
// cost bytes and say nothing.
func tidy(md []byte) string {
	return blankRuns.ReplaceAllString(string(bytes.TrimSpace(md)), "\n\n")
}
