// Package upload makes a kept file (sessions.KeptFile) into what a
// channel's Uploader sends: a safe name with the extension of its sniffed
// type, an image scaled down to the platform's limit, a file over the
// limit refused — or, where the platform takes no such file, the text
// that goes instead. Delivery and the outbox both send files through it.
package upload

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"

	"golang.org/x/image/draw"

	"github.com/parleyhq/parley/agent"
	agentfiles "github.com/parleyhq/parley/agent/files"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/sessions"
)

// Ready is a kept file made ready for one channel: either File, to
// upload, or Note, the text that goes instead (Outcome then says why:
// metrics.FileRefused or metrics.FileNoted).
type Ready struct {
	File    channels.File
	Note    string
	Outcome string
}

// Prepare makes f, with caption, ready for a chat that takes lim (up is
// false when the channel has no Uploader at all).
func Prepare(f sessions.KeptFile, caption string, lim channels.FileLimits, up bool) Ready {
	name := agentfiles.SafeName(f.Name, f.Type)
	out := channels.File{Name: name, Type: f.Type, Data: f.Data, Caption: caption}
	limit := lim.MaxFile
	if out.Image() {
		limit = lim.MaxImage
	}
	switch {
	case !up || limit <= 0:
		return Ready{Note: note(caption, name, f, "this chat does not take files from me"), Outcome: metrics.FileNoted}
	case int64(len(f.Data)) <= limit:
		return Ready{File: out}
	case !out.Image():
		return Ready{Note: note(caption, name, f, fmt.Sprintf("it is larger than the %s this chat takes", agent.ByteSize(limit))), Outcome: metrics.FileRefused}
	}
	data, typ, err := ScaleDown(f.Data, limit)
	if err != nil {
		return Ready{Note: note(caption, name, f, fmt.Sprintf("it is larger than the %s this chat takes, even scaled down", agent.ByteSize(limit))), Outcome: metrics.FileRefused}
	}
	out.Data, out.Type, out.Name = data, typ, agentfiles.SafeName(name, typ)
	return Ready{File: out}
}

// Gone is the note for a file no longer kept (it expired before it could
// be sent).
func Gone(caption, id string) Ready {
	return Ready{Note: joinNote(caption, fmt.Sprintf("(I meant to send a file, %s, but it is no longer kept, so it could not be sent.)", id)), Outcome: metrics.FileRefused}
}

// Failed is what a user is told of a file whose upload was given up.
func Failed(caption, name string) string {
	return joinNote(caption, fmt.Sprintf("(I could not send the file %s: the chat did not take it. Ask me again to retry.)", name))
}

func note(caption, name string, f sessions.KeptFile, why string) string {
	return joinNote(caption, fmt.Sprintf("(I made a file for you, %s (%s, %s), but could not send it here: %s.)", name, f.Type, agent.ByteSize(f.Size), why))
}

func joinNote(caption, note string) string {
	if caption = strings.TrimSpace(caption); caption != "" {
		return caption + "\n" + note
	}
	return note
}

// maxSide bounds the longer side of a scaled image: the platforms show
// nothing larger anyway.
const maxSide = 4096

// errTooLarge is an image that does not fit its limit even scaled down.
var errTooLarge = errors.New("upload: too large even scaled down")

// ScaleDown re-encodes an image (already checked by agent/files.Sniff)
// smaller until it fits limit bytes: PNG stays PNG while it can (charts,
// screenshots keep their sharp edges), then JPEG, halving the sides each
// round. It returns the bytes and their type.
func ScaleDown(data []byte, limit int64) ([]byte, string, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || int64(cfg.Width)*int64(cfg.Height) > agentfiles.MaxPixels {
		return nil, "", fmt.Errorf("upload: not an image to scale: %v", err)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("upload: decode: %w", err)
	}
	b := img.Bounds()
	side := min(maxSide, max(b.Dx(), b.Dy()))
	for range 6 {
		w, h := fit(b.Dx(), b.Dy(), side)
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Over, nil)
		var buf bytes.Buffer
		if err := png.Encode(&buf, dst); err == nil && int64(buf.Len()) <= limit {
			return buf.Bytes(), "image/png", nil
		}
		buf.Reset()
		if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 85}); err != nil {
			return nil, "", fmt.Errorf("upload: encode: %w", err)
		}
		if int64(buf.Len()) <= limit {
			return buf.Bytes(), "image/jpeg", nil
		}
		side /= 2
	}
	return nil, "", errTooLarge
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
