package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"

	// Decoders of the formats models take, registered with image.
	_ "image/gif"
	_ "image/png"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/sessions"
)

// Image errors, told apart for the note and the label.
var (
	errCorrupt  = errors.New("media: corrupt image")
	errBomb     = errors.New("media: too many pixels")
	errTooLarge = errors.New("media: too large even scaled down")
)

// checked is an image that passed the checks, as it is sent.
type checked struct {
	url           string // data URL
	mime          string // sniffed, of the original
	size          int64  // of the original
	sum           string // sha256 of the original, hex
	width, height int    // of the original
	scaled        bool
	sentW, sentH  int
}

func (c checked) ref(a channels.Attachment) sessions.Attachment {
	return sessions.Attachment{Kind: channels.AttachmentImage, ID: a.ID, Name: a.Name, MIME: c.mime,
		Size: c.size, SHA256: c.sum, Width: c.width, Height: c.height, Meta: a.Meta}
}

// image checks data: its header's dimensions against the pixel cap
// first, then a full decode, then a scale-down when it is too large.
func (p *Preparer) image(data []byte) (checked, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return checked{}, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return checked{}, errCorrupt
	}
	if int64(cfg.Width)*int64(cfg.Height) > p.cfg.MaxImagePixels {
		return checked{}, fmt.Errorf("%w: %dx%d", errBomb, cfg.Width, cfg.Height)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return checked{}, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	sum := sha256.Sum256(data)
	c := checked{mime: "image/" + format, size: int64(len(data)), sum: hex.EncodeToString(sum[:]),
		width: cfg.Width, height: cfg.Height, sentW: cfg.Width, sentH: cfg.Height}
	sent, mime := data, c.mime
	if int64(len(data)) > p.cfg.MaxImageBytes || cfg.Width > MaxSide || cfg.Height > MaxSide {
		sent, c.sentW, c.sentH, err = scaleDown(img, p.cfg.MaxImageBytes)
		if err != nil {
			return checked{}, err
		}
		c.scaled, mime = true, "image/jpeg"
	}
	c.url = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(sent)
	return c, nil
}

// scaleDown fits img into MaxSide×MaxSide (and smaller, until its JPEG
// fits max bytes), drawn on white (JPEG has no transparency).
func scaleDown(img image.Image, max int64) ([]byte, int, int, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	side := MaxSide
	for range 4 {
		sw, sh := fit(w, h, side)
		dst := image.NewRGBA(image.Rect(0, 0, sw, sh))
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.CatmullRom.Scale(dst, dst.Bounds(), img, b, draw.Over, nil)
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 85}); err != nil {
			return nil, 0, 0, fmt.Errorf("media: encode: %w", err)
		}
		if int64(buf.Len()) <= max {
			return buf.Bytes(), sw, sh, nil
		}
		side /= 2
	}
	return nil, 0, 0, errTooLarge
}

// fit scales w×h to at most side on its longer side, never up.
func fit(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, h*side/w)
	}
	return max(1, w*side/h), side
}

// imageFailure names an image's failure for the model and the label.
func imageFailure(err error) (outcome, why string) {
	switch {
	case errors.Is(err, errBomb):
		return OutcomeBomb, "its picture is too large in pixels"
	case errors.Is(err, errTooLarge):
		return OutcomeTooLarge, "it is too large even scaled down"
	}
	return OutcomeCorrupt, "the image is damaged or not what it claims to be"
}

// describeImage is the line for the model about the n-th image, after
// which its image_url part follows.
func describeImage(n int, name string, ref sessions.Attachment, c checked) string {
	s := fmt.Sprintf("[image %d: %s, %s, %dx%d, %s, sha256 %s", n, name, ref.MIME, ref.Width, ref.Height, size(ref.Size), shortSum(ref.SHA256))
	if c.scaled {
		s += fmt.Sprintf(", sent scaled down to %dx%d", c.sentW, c.sentH)
	}
	return s + "]"
}

func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// Resend fetches a stored image again for a later turn and checks it is
// the same (its sha256); ok is false when it cannot be sent again.
func (p *Preparer) Resend(ctx context.Context, fetch Fetch, ref sessions.Attachment) (url string, ok bool) {
	if fetch == nil || ref.Kind != channels.AttachmentImage || ref.SHA256 == "" {
		return "", false
	}
	a := channels.Attachment{Kind: ref.Kind, ID: ref.ID, Name: ref.Name, MIME: ref.MIME, Size: ref.Size, Meta: ref.Meta}
	rc, err := fetch(ctx, a, p.cfg.MaxDownloadBytes)
	if err != nil {
		return "", false
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return "", false
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.SHA256 {
		return "", false
	}
	c, err := p.image(data)
	if err != nil {
		return "", false
	}
	return c.url, true
}
