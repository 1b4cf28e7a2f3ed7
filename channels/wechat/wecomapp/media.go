package wecomapp

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parleyhq/parley/channels"
)

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements channels.AttachmentFetcher: media/get of the
// app the conversation belongs to (m.Workspace), never past limit.
func (a *Adapter) FetchAttachment(ctx context.Context, m channels.Message, att channels.Attachment, limit int64) (io.ReadCloser, error) {
	ap, ok := a.apps[m.Workspace]
	if !ok {
		return nil, fmt.Errorf("wecomapp: no app named %q", m.Workspace)
	}
	if att.ID == "" {
		return nil, errors.New("wecomapp: attachment without a media id")
	}
	return ap.api.Media(ctx, att.ID, limit)
}
