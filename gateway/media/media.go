// Package media turns the attachments of a chat message into what the
// model is given: images as data URLs for image_url content parts, small
// text files quoted as untrusted data, everything else named. It fetches
// through the adapter's channels.AttachmentFetcher, during the turn, and
// trusts nothing the platform claims: the type is sniffed from the bytes,
// an image's dimensions are checked from its header before it is decoded
// (a small file can claim a huge picture), it is decoded in full before it
// is sent (a corrupt image would make the model refuse the whole request),
// and nothing is read past the media: section's limits (Config).
//
// Images go as data URLs, never as links for the model to fetch: a
// platform's file URL needs the bot's credentials, and serving files from
// Parley would open private files to anyone holding the link. An image
// over media.max_image_bytes, or wider or taller than MaxSide, is scaled
// down (and sent as JPEG) rather than refused: a screenshot of a 5K
// display is still worth reading at 2048 pixels.
//
// Every attachment that cannot be read gets a line for the model saying
// so and a short note for the user; the rest of the message is answered.
package media

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/sessions"
)

// MaxSide is the longest side, in pixels, of an image as sent; a larger
// one is scaled down to it. Vision models scale to about this themselves.
const MaxSide = 2048

// Fetch opens an attachment's bytes, at most limit of them (the adapter's
// AttachmentFetcher bound to the message).
type Fetch func(ctx context.Context, a channels.Attachment, limit int64) (io.ReadCloser, error)

// Outcomes of one attachment, the outcome label of
// parley_attachments_total.
const (
	OutcomeOK          = "ok"         // sent to the model (quoted, for a text file)
	OutcomeDownscaled  = "downscaled" // an image sent scaled down
	OutcomeNamed       = "named"      // a binary file: named, not read
	OutcomeNoVision    = "no_vision"  // an image the model cannot see
	OutcomeTooMany     = "too_many"   // past media.max_images
	OutcomeTooLarge    = "too_large"  // over a byte limit
	OutcomeBomb        = "too_many_pixels"
	OutcomeCorrupt     = "corrupt"
	OutcomeUnsupported = "unsupported" // an image of a format models do not take, or no fetcher
	OutcomeForbidden   = "forbidden"   // the platform refused the download
	OutcomeNotFound    = "not_found"
	OutcomeFailed      = "failed" // any other download failure
)

// Item is what became of one attachment.
type Item struct {
	Kind    string // channels.AttachmentImage or channels.AttachmentFile, as the bytes showed where read
	Outcome string
}

// Result is what a message's attachments give the turn.
type Result struct {
	// Text follows the user's text in the user message: a line per
	// attachment, and the quoted text of text files.
	Text string
	// Refs are stored with the user message; Images (data URLs) go with
	// it to the model, never into the history.
	Refs   []sessions.Attachment
	Images []string
	// Notes are short sentences for the user about attachments that could
	// not be read.
	Notes []string
	// NoVision reports images left out because the model has no vision.
	NoVision bool
	Items    []Item
}

// Preparer applies one configuration's limits.
type Preparer struct {
	cfg Config
}

// New returns a Preparer with the limits of cfg, which it copies; nil, or
// a limit left zero, takes DefaultConfig's.
func New(c *Config) *Preparer {
	d := DefaultConfig()
	if c == nil {
		c = d
	}
	cfg := *c
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = d.MaxImageBytes
	}
	if cfg.MaxImagePixels <= 0 {
		cfg.MaxImagePixels = d.MaxImagePixels
	}
	if cfg.MaxDownloadBytes <= 0 {
		cfg.MaxDownloadBytes = d.MaxDownloadBytes
	}
	if cfg.MaxTextBytes <= 0 {
		cfg.MaxTextBytes = d.MaxTextBytes
	}
	return &Preparer{cfg: cfg}
}

// ResendRounds is how many later turns an image is sent again with.
func (p *Preparer) ResendRounds() int { return p.cfg.ResendRounds }

// Prepare fetches and checks atts. vision reports whether the model of the
// turn takes images; without it images are not even downloaded. fetch nil
// means the channel cannot download attachments.
func (p *Preparer) Prepare(ctx context.Context, fetch Fetch, atts []channels.Attachment, vision bool) Result {
	var r Result
	var lines []string
	images := 0
	for _, a := range atts {
		line, it := p.one(ctx, fetch, a, vision, &images, &r)
		lines = append(lines, line)
		r.Items = append(r.Items, it)
	}
	r.Text = strings.Join(lines, "\n")
	return r
}

// one handles one attachment: the line for the model, and what became of it.
func (p *Preparer) one(ctx context.Context, fetch Fetch, a channels.Attachment, vision bool, images *int, r *Result) (string, Item) {
	name := cleanName(a.Name, a.ID)
	claimedImage := a.Kind == channels.AttachmentImage
	it := Item{Kind: a.Kind}
	fail := func(outcome, why, note string) (string, Item) {
		it.Outcome = outcome
		if note != "" {
			r.Notes = append(r.Notes, note)
		}
		return fmt.Sprintf("[%s: %s — not read: %s]", kindWord(it.Kind), name, why), it
	}
	switch {
	case fetch == nil:
		return fail(OutcomeUnsupported, "this channel cannot download attachments", fmt.Sprintf("I can't read attachments here, so I left out %s.", name))
	case claimedImage && !vision:
		return p.noVision(a, name, r), Item{Kind: channels.AttachmentImage, Outcome: OutcomeNoVision}
	case claimedImage && *images >= p.cfg.MaxImages:
		return fail(OutcomeTooMany, "too many images", fmt.Sprintf("I read only the first %d images of a message, so I left out %s.", p.cfg.MaxImages, name))
	case claimedImage && a.Size > p.cfg.MaxDownloadBytes:
		return fail(OutcomeTooLarge, "too large", fmt.Sprintf("%s is too large for me to read (over %s).", name, size(p.cfg.MaxDownloadBytes)))
	}
	rc, err := fetch(ctx, a, p.cfg.MaxDownloadBytes)
	if err != nil {
		outcome, why := fetchFailure(err)
		return fail(outcome, why, fmt.Sprintf("I couldn't download %s (%s).", name, why))
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 512)
	head, err := br.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) {
		outcome, why := fetchFailure(err)
		return fail(outcome, why, fmt.Sprintf("I couldn't download %s (%s).", name, why))
	}
	sniffed := http.DetectContentType(head)
	switch {
	case imageFormats[sniffed]:
		it.Kind = channels.AttachmentImage
		if !vision {
			return p.noVision(a, name, r), Item{Kind: channels.AttachmentImage, Outcome: OutcomeNoVision}
		}
		if *images >= p.cfg.MaxImages {
			return fail(OutcomeTooMany, "too many images", fmt.Sprintf("I read only the first %d images of a message, so I left out %s.", p.cfg.MaxImages, name))
		}
		data, err := io.ReadAll(br)
		if err != nil {
			outcome, why := fetchFailure(err)
			return fail(outcome, why, fmt.Sprintf("I couldn't read %s (%s).", name, why))
		}
		img, err := p.image(data)
		if err != nil {
			outcome, why := imageFailure(err)
			return fail(outcome, why, fmt.Sprintf("I couldn't read %s: %s.", name, why))
		}
		*images++
		it.Outcome = OutcomeOK
		if img.scaled {
			it.Outcome = OutcomeDownscaled
		}
		ref := img.ref(a)
		r.Refs = append(r.Refs, ref)
		r.Images = append(r.Images, img.url)
		return describeImage(*images, name, ref, img), it
	case claimedImage:
		it.Kind = channels.AttachmentImage
		return fail(OutcomeUnsupported, "not an image format I can read", fmt.Sprintf("I can't read %s: only PNG, JPEG, GIF and WebP images.", name))
	case isText(sniffed, head):
		it.Kind = channels.AttachmentFile
		return p.text(br, a, name, r, &it)
	}
	it.Kind = channels.AttachmentFile
	it.Outcome = OutcomeNamed
	r.Refs = append(r.Refs, sessions.Attachment{Kind: channels.AttachmentFile, ID: a.ID, Name: a.Name, MIME: baseType(sniffed), Size: a.Size, Meta: a.Meta})
	return fmt.Sprintf("[file: %s, %s%s — not text, so not shown]", name, baseType(sniffed), sizeSuffix(a.Size)), it
}

// noVision is the line of an image the model cannot see.
func (p *Preparer) noVision(a channels.Attachment, name string, r *Result) string {
	r.NoVision = true
	r.Refs = append(r.Refs, sessions.Attachment{Kind: channels.AttachmentImage, ID: a.ID, Name: a.Name, Size: a.Size, Meta: a.Meta})
	return fmt.Sprintf("%s %s", noVisionLine, name)
}

// noVisionLine is the agent's note for an image a model without vision
// is not sent.
const noVisionLine = "[image omitted: model has no vision]"

// imageFormats are the sniffed types models take as images.
var imageFormats = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// fetchFailure names a download's failure for the model and the label.
func fetchFailure(err error) (outcome, why string) {
	switch {
	case errors.Is(err, channels.ErrAttachmentTooLarge):
		return OutcomeTooLarge, "it is too large"
	case errors.Is(err, channels.ErrAttachmentForbidden):
		return OutcomeForbidden, "the platform refused the download"
	case errors.Is(err, channels.ErrAttachmentNotFound):
		return OutcomeNotFound, "it is gone from the platform"
	}
	return OutcomeFailed, "the download failed"
}

func kindWord(kind string) string {
	if kind == channels.AttachmentImage {
		return "image"
	}
	return "file"
}

// cleanName is a file name fit for a bracketed line: no control
// characters, no brackets or backticks, at most 100 characters.
func cleanName(name, id string) string {
	if strings.TrimSpace(name) == "" {
		name = id
	}
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == 100 {
			b.WriteString("…")
			break
		}
		switch {
		case unicode.IsControl(r) || r == utf8.RuneError:
			r = ' '
		case r == '[' || r == '{':
			r = '('
		case r == ']' || r == '}':
			r = ')'
		case r == '`':
			r = '\''
		}
		b.WriteRune(r)
		n++
	}
	if s := strings.TrimSpace(b.String()); s != "" {
		return s
	}
	return "unnamed"
}

// baseType is a sniffed type without its parameters.
func baseType(t string) string {
	t, _, _ = strings.Cut(t, ";")
	return strings.TrimSpace(t)
}

// size writes n bytes for people.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func sizeSuffix(n int64) string {
	if n <= 0 {
		return ""
	}
	return ", " + size(n)
}
