package webhook

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Status is what an operator sees of one webhook: where its sender posts
// and its last request's outcome (nil before the first).
type Status struct {
	Name string       `json:"name"`
	Kind string       `json:"kind"`
	Path string       `json:"path"`
	Last *LastRequest `json:"last,omitempty"`
}

// Lister lists the webhooks of the file with the last request each
// recorded in the Redis the replicas share, for `parley triggers list`
// and the admin console alike.
type Lister struct {
	Webhooks Webhooks
	Redis    redis.UniversalClient
	Prefix   string
}

// Statuses returns every webhook, by name.
func (l Lister) Statuses(ctx context.Context) ([]Status, error) {
	names := make([]string, 0, len(l.Webhooks))
	for name, w := range l.Webhooks {
		if w != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]Status, 0, len(names))
	for _, name := range names {
		st := Status{Name: name, Kind: l.Webhooks[name].Kind, Path: "/hooks/" + name}
		last, ok, err := Last(ctx, l.Redis, l.Prefix, name)
		if err != nil {
			return nil, err
		}
		if ok {
			st.Last = &last
		}
		out = append(out, st)
	}
	return out, nil
}
