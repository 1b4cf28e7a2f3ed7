package console

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parleyhq/parley/channels"
)

// Images given on the command line (parley chat --image FILE). They go
// with the first message the console sends, and they are the only files
// FetchAttachment opens: an attachment naming any other path — from a
// stored history, say — is not found.

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// AttachImages makes the images at paths (parley chat --image) go with
// the next message, and makes them the files FetchAttachment may open.
// It fails when one is not a regular file.
func (c *Adapter) AttachImages(paths []string) error {
	allowed, atts, err := attach(paths)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allowed == nil {
		c.allowed = map[string]bool{}
	}
	for p := range allowed {
		c.allowed[p] = true
	}
	c.pending = append(c.pending, atts...)
	return nil
}

// attach resolves the command line's image paths: each must be a
// regular file (not a device or a pipe that never ends).
func attach(paths []string) (map[string]bool, []channels.Attachment, error) {
	allowed := map[string]bool{}
	var atts []channels.Attachment
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, nil, fmt.Errorf("console: image %s: %w", p, err)
		}
		info, err := os.Stat(abs)
		if err != nil {
			return nil, nil, fmt.Errorf("console: image: %w", err)
		}
		if !info.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("console: image %s is not a regular file", p)
		}
		allowed[abs] = true
		atts = append(atts, channels.Attachment{Kind: channels.AttachmentImage, ID: abs, Name: filepath.Base(abs), Size: info.Size()})
	}
	return allowed, atts, nil
}

// FetchAttachment implements channels.AttachmentFetcher: it opens a file
// given on the command line, at most limit bytes of it.
func (c *Adapter) FetchAttachment(_ context.Context, _ channels.Message, a channels.Attachment, limit int64) (io.ReadCloser, error) {
	c.mu.Lock()
	ok := c.allowed[a.ID]
	c.mu.Unlock()
	if !ok {
		return nil, channels.ErrAttachmentNotFound
	}
	f, err := os.Open(a.ID)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, channels.ErrAttachmentNotFound
		}
		if os.IsPermission(err) {
			return nil, channels.ErrAttachmentForbidden
		}
		return nil, fmt.Errorf("console: %w", err)
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, channels.ErrAttachmentNotFound
	}
	if limit > 0 && info.Size() > limit {
		f.Close()
		return nil, channels.ErrAttachmentTooLarge
	}
	return channels.CapBody(f, limit), nil
}
