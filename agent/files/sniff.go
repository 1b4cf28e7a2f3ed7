package files

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"mime"
	"net/http"
	"strings"

	// Decoders of the image formats a file may be, registered with image.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// MaxPixels bounds an image's width×height, read from its header before
// anything is decoded: a small file can claim a picture that would take
// gigabytes to decode (a decompression bomb).
const MaxPixels = 40_000_000

// Refusals of Sniff, for the tool result (and tests).
var (
	ErrExecutable = errors.New("the bytes are an executable program")
	ErrHTML       = errors.New("the bytes are an HTML page")
	ErrForged     = errors.New("the bytes are not what the tool says they are")
	ErrBadImage   = errors.New("the bytes are not a readable image")
	ErrBomb       = errors.New("the image is too large to decode")
)

// textTypes are the types a tool may give a file whose bytes sniff as
// plain text: the bytes cannot tell CSV from text, the claim can.
var textTypes = map[string]bool{
	"text/plain": true, "text/csv": true, "text/markdown": true, "text/tab-separated-values": true,
	"application/json": true, "application/x-ndjson": true, "application/yaml": true, "application/x-yaml": true,
	"text/x-log": true,
}

// Sniff decides what data is from its bytes, claim being what the tool
// said: an executable or an HTML page is refused whatever it claims, a
// claimed image must be one (and within MaxPixels), and a file whose bytes
// are plain text may keep a text type it claims. The type returned is
// what the file is sent as.
func Sniff(data []byte, claim string) (string, error) {
	claim = baseType(claim)
	if executable(data) {
		return "", ErrExecutable
	}
	sniffed := baseType(http.DetectContentType(data))
	switch {
	case sniffed == "text/html" || sniffed == "text/xml" && bytes.Contains(bytes.ToLower(data[:min(len(data), 512)]), []byte("<html")):
		return "", ErrHTML
	case strings.HasPrefix(sniffed, "image/"):
		if err := checkImage(data); err != nil {
			return "", err
		}
		return sniffed, nil
	case strings.HasPrefix(claim, "image/"):
		return "", fmt.Errorf("%w: it says %s, they are %s", ErrForged, claim, sniffed)
	case sniffed == "text/plain" && textTypes[claim]:
		return claim, nil
	}
	return sniffed, nil
}

// checkImage reads the image's header: its dimensions against MaxPixels,
// then a decode of the whole, so that a file sent as an image is one.
func checkImage(data []byte) error {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return ErrBadImage
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return fmt.Errorf("%w: %d×%d pixels", ErrBomb, cfg.Width, cfg.Height)
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return ErrBadImage
	}
	return nil
}

// executable reports whether data starts as a program does: ELF, PE
// (MZ), Mach-O, or a script with #!.
func executable(data []byte) bool {
	for _, magic := range [][]byte{
		[]byte("\x7fELF"), []byte("MZ"), []byte("#!"),
		{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, {0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe}, {0xca, 0xfe, 0xba, 0xbe},
	} {
		if bytes.HasPrefix(data, magic) {
			return true
		}
	}
	return false
}

// baseType is a MIME type without its parameters, lower case.
func baseType(t string) string {
	if m, _, err := mime.ParseMediaType(t); err == nil {
		return m
	}
	t, _, _ = strings.Cut(t, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
