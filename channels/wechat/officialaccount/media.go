package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parleyhq/parley/channels"
)

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements channels.AttachmentFetcher: media/get with
// the account's token, never past limit.
func (a *Adapter) FetchAttachment(ctx context.Context, m channels.Message, att channels.Attachment, limit int64) (io.ReadCloser, error) {
	if m.Workspace != "" && m.Workspace != a.cfg.AppID {
		return nil, fmt.Errorf("officialaccount: attachment of another account %q", m.Workspace)
	}
	if att.ID == "" {
		return nil, errors.New("officialaccount: attachment without a media id")
	}
	return a.api.Media(ctx, att.ID, limit)
}
