package gateway

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/media"
	"github.com/parleyhq/parley/metrics"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/sessions"
)

// noVisionNotice tells a user, once per conversation, that their images
// were left out.
const noVisionNotice = "The model answering here cannot see images, so I left yours out and answered the text."

// visionChecker is implemented by a Responder that knows which models
// take images (the agent).
type visionChecker interface {
	HasVision(model string) bool
}

// attachments reads the images and files of the messages of turns.
type attachments struct {
	agent   Responder // asked whether a model takes images (visionChecker)
	media   *media.Preparer
	store   sessions.Store
	metrics *metrics.Metrics
}

// turnMedia is what a message's attachments add to its turn.
type turnMedia struct {
	text    string // after the user's text
	refs    []sessions.Attachment
	images  []string
	history map[int][]string
	notes   []string // for the user, after the answer
}

// fetcher returns the download function of f, m's channel's, bound to m,
// or nil when the channel cannot download attachments (f is nil).
func fetcher(f channels.AttachmentFetcher, m channels.Message) media.Fetch {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, a channels.Attachment, limit int64) (io.ReadCloser, error) {
		return f.FetchAttachment(ctx, m, a, limit)
	}
}

// prepare fetches and checks m's attachments, and the images of the recent
// stored messages that are sent again, for a turn of the model eff names.
func (g *attachments) prepare(ctx context.Context, f channels.AttachmentFetcher, conv string, m channels.Message, eff *policy.Effective, history sessions.History) (turnMedia, error) {
	vision := false
	if v, ok := g.agent.(visionChecker); ok {
		vision = v.HasVision(eff.ModelKey())
	}
	fetch := fetcher(f, m)
	var tm turnMedia
	if len(m.Attachments) > 0 {
		r := g.media.Prepare(ctx, fetch, m.Attachments, vision)
		for _, it := range r.Items {
			g.metrics.Attachments.WithLabelValues(m.Channel, it.Kind, it.Outcome).Inc()
		}
		tm.text, tm.refs, tm.images, tm.notes = r.Text, r.Refs, r.Images, r.Notes
		if r.NoVision {
			told, err := g.store.Seen(ctx, "no-vision", conv)
			if err != nil {
				return turnMedia{}, storeError{err}
			}
			if !told {
				tm.notes = append(tm.notes, noVisionNotice)
			}
		}
	}
	if vision {
		tm.history = g.resend(ctx, fetch, history)
	}
	return tm, nil
}

// resumeImages fetches again, for a turn resumed after an approval, the
// images of the message it paused on (the paused turn keeps their
// references, not their bytes) and those of the recent history. Nothing
// is counted or noted again: the turn's first part did that.
func (g *attachments) resumeImages(ctx context.Context, f channels.AttachmentFetcher, m channels.Message, eff *policy.Effective, history sessions.History) ([]string, map[int][]string) {
	v, ok := g.agent.(visionChecker)
	if !ok || !v.HasVision(eff.ModelKey()) {
		return nil, nil
	}
	fetch := fetcher(f, m)
	if fetch == nil {
		return nil, nil
	}
	var images []string
	if len(m.Attachments) > 0 {
		images = g.media.Prepare(ctx, fetch, m.Attachments, true).Images
	}
	return images, g.resend(ctx, fetch, history)
}

// resend fetches again the images of the user messages among the last
// media.resend_rounds rounds of history, by entry. An image that cannot
// be fetched, or is no longer the same, stays a description.
func (g *attachments) resend(ctx context.Context, fetch media.Fetch, history sessions.History) map[int][]string {
	rounds := g.media.ResendRounds()
	if fetch == nil || rounds <= 0 {
		return nil
	}
	var out map[int][]string
	seen := 0
	for i := history.Len() - 1; i >= 0 && seen < rounds; i-- {
		p, err := sessions.Peek(history.Entry(i))
		if err != nil || p.Role != "user" || p.Kind != "" {
			continue
		}
		seen++
		if len(p.Attachments) == 0 {
			continue
		}
		var refs []sessions.Attachment
		if err := json.Unmarshal(p.Attachments, &refs); err != nil {
			continue
		}
		for _, ref := range refs {
			if url, ok := g.media.Resend(ctx, fetch, ref); ok {
				if out == nil {
					out = map[int][]string{}
				}
				out[i] = append(out[i], url)
			}
		}
	}
	return out
}

// withNotes adds the notes about attachments to a reply's text.
func withNotes(text string, notes []string) string {
	if len(notes) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	if text != "" {
		b.WriteString("\n\n")
	}
	for i, n := range notes {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("_Note: " + n + "_")
	}
	return b.String()
}
