package officialaccount

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
)

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// mediaAttachments describes the image of an image message: its MediaId,
// downloaded later with the account's access token (media/get of the
// temporary media; WeChat keeps it three days). The PicUrl WeChat sends
// too is not used: the API needs no address check.
func mediaAttachments(msg wxcrypto.Message) []channels.Attachment {
	if msg.MsgType != "image" || msg.MediaID == "" {
		return nil
	}
	return []channels.Attachment{{Kind: channels.AttachmentImage, ID: msg.MediaID}}
}

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
