package web

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
)

// textTypes are the declared media types web_fetch reads besides text/*.
var textTypes = map[string]bool{
	"application/json":         true,
	"application/ld+json":      true,
	"application/xml":          true,
	"application/xhtml+xml":    true,
	"application/rss+xml":      true,
	"application/atom+xml":     true,
	"application/javascript":   true,
	"application/x-javascript": true,
	"application/ecmascript":   true,
	"application/x-ndjson":     true,
	"application/yaml":         true,
	"application/x-yaml":       true,
	"application/toml":         true,
	"application/x-sh":         true,
}

// sniffLen is how much of a body content sniffing looks at.
const sniffLen = 512

// ErrNotText is wrapped by the refusal of a binary body.
var ErrNotText = errors.New("not a text document")

// classifyBody decides whether body is text web_fetch can read, and whether
// it is HTML. Neither the server's word nor the bytes alone decide: a body
// declared as a binary type is refused, and so is a body whose first bytes
// are binary, whatever the server declared.
func classifyBody(mediaType string, body []byte) (isHTML bool, err error) {
	mediaType = strings.ToLower(mediaType)
	if mediaType != "" && !strings.HasPrefix(mediaType, "text/") && !textTypes[mediaType] &&
		!strings.HasSuffix(mediaType, "+json") && !strings.HasSuffix(mediaType, "+xml") {
		return false, fmt.Errorf("%w: the server sent %s; web_fetch reads HTML, plain text, Markdown, JSON and XML", ErrNotText, mediaType)
	}
	if len(body) == 0 {
		return false, nil
	}
	head := body[:min(len(body), sniffLen)]
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	if !strings.HasPrefix(sniffed, "text/") {
		declared := mediaType
		if declared == "" {
			declared = "no type"
		}
		return false, fmt.Errorf("%w: the content looks like %s (the server said %s)", ErrNotText, sniffed, declared)
	}
	switch mediaType {
	case "text/html", "application/xhtml+xml":
		return true, nil
	case "":
		return sniffed == "text/html", nil
	}
	return false, nil
}

// decodeText converts body to UTF-8. The charset comes from a byte order
// mark, the Content-Type header or a <meta> tag; a body that is valid UTF-8
// is read as UTF-8 even when nothing says so (the HTML default would be
// windows-1252, which garbles most of the modern web).
func decodeText(body []byte, contentType string, truncated bool) string {
	if truncated {
		body = trimPartialRune(body)
	}
	enc, name, certain := charset.DetermineEncoding(body, contentType)
	if name == "utf-8" || (!certain && utf8.Valid(body)) {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// trimPartialRune drops an incomplete UTF-8 sequence that a cut left at the
// end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
