package feishu

import (
	"context"
	"errors"

	"github.com/parleyhq/parley/channels"
)

// Names of the room's senders. The message list gives only open_ids; the
// names of people mentioned come with the mentions, and the others from
// the contact API (GET /open-apis/contact/v3/users/:open_id, which needs
// contact:user.base:readonly and the user within the app's contact
// range), cached by a channels.NameCache.

// nameSenders fills in the AuthorName of msgs: from the mentions seen
// (known), then the cache and the contact API.
func (a *Adapter) nameSenders(ctx context.Context, tenant string, msgs []channels.RoomMessage, known map[string]string) {
	for i := range msgs {
		if name, ok := known[msgs[i].Author]; ok && msgs[i].AuthorName == "" && !msgs[i].Bot {
			msgs[i].AuthorName = name
		}
	}
	a.names.Name(ctx, tenant, msgs, a.opts.Now(), a.contactName, a.log)
}

// contactName asks the contact API for a user's name. A refusal for good
// (no permission, a user outside the app's contact range, an unknown
// user, an id that is no open_id) is channels.ErrUnnamed.
func (a *Adapter) contactName(ctx context.Context, openID string) (string, error) {
	if !isOpenID(openID) {
		return "", channels.ErrUnnamed
	}
	var out struct {
		Data struct {
			User struct {
				Name string `json:"name"`
			} `json:"user"`
		} `json:"data"`
	}
	err := a.callN(ctx, 1, "contact_user", "GET", "/open-apis/contact/v3/users/:user_id",
		map[string]string{"user_id": openID}, map[string]string{"user_id_type": "open_id"}, nil, &out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && !apiErr.Retryable() {
		return "", errors.Join(channels.ErrUnnamed, err)
	}
	if err != nil {
		return "", err
	}
	return cut(out.Data.User.Name, channels.MaxNameBytes), nil
}
