package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Attachments: the rules every adapter follows.
//
// An adapter that sees an image or a file in a message describes it as an
// Attachment on Message.Attachments — a reference (the platform's file id
// or key, and whatever else it needs to download it in Meta), never the
// bytes — and submits the message as usual; the webhook is acked at once.
// A message whose only content is attachments is submitted with empty
// Text, not marked Unsupported.
//
// The bytes are fetched later, by the gateway's worker during the turn,
// through the adapter's AttachmentFetcher: never on the ack path, and
// never more than the limit the gateway passes (the adapter stops reading
// there and fails with ErrAttachmentTooLarge; CapBody does that for a
// response body). The platform's MIME type and size are claims: the
// gateway sniffs the bytes and counts them itself.
//
// A later turn may fetch the attachment again (an image is sent to the
// model again while it is recent). FetchAttachment is then called with the
// later message of the same conversation, so a fetcher must find the file
// from the Attachment and the conversation fields of m (Channel, Workspace,
// Chat, Thread) alone — put a message id the download API needs into
// Attachment.Meta, not only in Message.Meta.
//
// The Attachment, Meta included, is stored in the conversation's history:
// put no credential in it (a bot token, a signed URL that grants more than
// this file). A per-file key the platform sent with the message is fine.
//
// Failures are told apart with errors.Is: ErrAttachmentTooLarge,
// ErrAttachmentForbidden (the platform refused: 401/403, the bot lacks a
// scope), ErrAttachmentNotFound (404/410, deleted or expired); anything
// else is a download failure. HTTPStatusError maps a status code onto them.
// A URL taken from a message is fetched only from the platform's own file
// hosts (an allow-list of scheme and host, checked before the request and
// again on every redirect), so a message cannot make the gateway reach an
// internal address. No adapter today fetches from a host the platform does
// not own; one that must would need an address guard at dial time like
// web_fetch's, which lives in agent/web and is not importable here.

// Kinds of attachment.
const (
	AttachmentImage = "image"
	AttachmentFile  = "file"
)

// Attachment is one image or file of a message, as the platform
// describes it.
type Attachment struct {
	// Kind is AttachmentImage or AttachmentFile: what the platform calls
	// it. The gateway decides from the bytes what it really is.
	Kind string `json:"kind"`
	// ID is the platform's file id or key.
	ID string `json:"id"`
	// Name is the file name, if the platform gives one.
	Name string `json:"name,omitempty"`
	// MIME is the type the platform claims; never trusted.
	MIME string `json:"mime,omitempty"`
	// Size is the size in bytes the platform claims (0: unknown); never
	// trusted, but a claim over the limit lets the gateway refuse without
	// a download.
	Size int64 `json:"size,omitempty"`
	// Meta is what the adapter needs to download it (a URL on the
	// platform's file host, a message id, a per-file key). Stored with the
	// history: no credentials.
	Meta map[string]string `json:"meta,omitempty"`
}

// AttachmentFetcher is implemented by adapters whose messages can carry
// attachments.
type AttachmentFetcher interface {
	// FetchAttachment opens a's bytes. m is a message of a's conversation
	// (perhaps a later one than a came with). The returned reader yields at
	// most limit bytes and fails with ErrAttachmentTooLarge past them; a
	// claimed or announced size over limit may fail at once. The caller
	// closes it.
	FetchAttachment(ctx context.Context, m Message, a Attachment, limit int64) (io.ReadCloser, error)
}

// Errors of FetchAttachment, told apart with errors.Is.
var (
	ErrAttachmentTooLarge  = errors.New("channels: attachment over the size limit")
	ErrAttachmentForbidden = errors.New("channels: attachment download refused by the platform")
	ErrAttachmentNotFound  = errors.New("channels: attachment not found")
)

// HTTPStatusError is the error for a download answered with status code:
// nil for 2xx, else wrapping ErrAttachmentForbidden (401, 403),
// ErrAttachmentNotFound (404, 410) or a plain failure naming the code.
func HTTPStatusError(code int) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w (HTTP %d)", ErrAttachmentForbidden, code)
	case code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%w (HTTP %d)", ErrAttachmentNotFound, code)
	default:
		return fmt.Errorf("channels: attachment download failed (HTTP %d)", code)
	}
}

// CapBody limits rc to limit bytes: it reads through until limit, and
// fails with ErrAttachmentTooLarge when the source has more (it reads one
// byte past limit to know, never more). Closing it closes rc. A limit of
// zero or less is no limit.
func CapBody(rc io.ReadCloser, limit int64) io.ReadCloser {
	if limit <= 0 {
		return rc
	}
	return &capped{rc: rc, left: limit}
}

type capped struct {
	rc   io.ReadCloser
	left int64 // bytes still allowed
	err  error
}

func (c *capped) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		// At the limit: one more byte means over it.
		var one [1]byte
		n, err := io.ReadFull(c.rc, one[:])
		if n > 0 {
			c.err = ErrAttachmentTooLarge
			return 0, c.err
		}
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.rc.Close() }
