package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/parleyhq/parley/channels"
)

var _ channels.Editor = (*Adapter)(nil)

// Feishu codes an edit is refused with that say the message cannot be
// edited the way it was tried.
const (
	codeMessageGone = 230011 // withdrawn or not found
)

// Edit implements channels.Editor: the message id shows part (a part as
// Parts cuts it) from now on. A post is sent as a shared card, which is
// redrawn (PATCH im/v1/messages/:message_id with the card); one sent as
// plain text, where the card was refused, is edited as text instead (PUT
// im/v1/messages/:message_id, msg_type text), the one other kind Feishu
// edits. One try each: the caller tries again.
func (a *Adapter) Edit(ctx context.Context, _ channels.Message, id, part string) error {
	var p outboxPart
	if err := json.Unmarshal([]byte(part), &p); err != nil || p.Text == "" {
		return &channels.PostError{Err: errors.New("feishu: an edit that is not a Feishu part")}
	}
	if id == "" {
		return &channels.PostError{Err: errors.New("feishu: an edit of no message")}
	}
	card, err := json.Marshal(cardFor(p.Text))
	if err != nil {
		return &channels.PostError{Err: err}
	}
	calls := a.calls.Once()
	err = a.callWith(ctx, calls, "edit_card", http.MethodPatch, "/open-apis/im/v1/messages/:message_id",
		map[string]string{"message_id": id}, nil, map[string]string{"content": string(card)}, nil)
	var apiErr *APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.Retryable() || apiErr.Code == codeMessageGone {
		return editError(ctx, err)
	}
	// Not a shared card: the post went out as text.
	text, err := json.Marshal(map[string]string{"text": p.Text})
	if err != nil {
		return &channels.PostError{Err: err}
	}
	err = a.callWith(ctx, calls, "edit_text", http.MethodPut, "/open-apis/im/v1/messages/:message_id",
		map[string]string{"message_id": id}, nil, map[string]string{"msg_type": "text", "content": string(text)}, nil)
	return editError(ctx, err)
}

// editError is err classified as a post's failure is, or nil.
func editError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	return postError(ctx, err)
}
