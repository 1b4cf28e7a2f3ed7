package files

import (
	"mime"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameBytes bounds a file's name as sent.
const maxNameBytes = 100

// extensions are the extensions files are sent with, by type; other
// types take the first the system knows, else .bin.
var extensions = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
	"application/pdf": ".pdf", "text/csv": ".csv", "text/plain": ".txt", "text/markdown": ".md",
	"application/json": ".json", "application/x-ndjson": ".ndjson", "application/yaml": ".yaml", "application/x-yaml": ".yaml",
	"text/tab-separated-values": ".tsv", "application/zip": ".zip", "application/x-gzip": ".gz", "application/gzip": ".gz",
	"application/octet-stream": ".bin", "text/x-log": ".log",
}

// Extension is the extension a file of type t is sent with.
func Extension(t string) string {
	t = baseType(t)
	if e, ok := extensions[t]; ok {
		return e
	}
	if es, err := mime.ExtensionsByType(t); err == nil && len(es) > 0 {
		return es[0]
	}
	return ".bin"
}

// SafeName makes a tool's name for a file of type t one a chat can show:
// its base name only (no directory, whichever separator), without control
// or invisible characters, not hidden, at most maxNameBytes, and ending in
// the extension of t — a look-alike such as "report.pdf.exe" for a PDF
// becomes "report.pdf", "invoice.exe" for a PNG "invoice.png".
func SafeName(name, t string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	name = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == '/', r == ':':
			return -1
		case unicode.IsSpace(r):
			return ' '
		}
		return r
	}, name)
	want := Extension(t)
	stem := strings.Trim(name, ". ")
	for {
		ext := path.Ext(stem)
		if ext == "" || strings.EqualFold(ext, want) || len(ext) > 6 {
			if strings.EqualFold(ext, want) {
				stem = strings.TrimSuffix(stem, ext)
			}
			break
		}
		stem = strings.TrimRight(strings.TrimSuffix(stem, ext), ". ")
	}
	if stem == "" {
		stem = "file"
	}
	if len(stem)+len(want) > maxNameBytes {
		cut := maxNameBytes - len(want)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		stem = stem[:cut]
	}
	return stem + want
}
