package skills

import (
	"sync"
	"sync/atomic"
)

// Registry holds the current Catalog and swaps it on Reload. Readers take
// Catalog() once per turn and keep using that snapshot, so a reload takes
// effect on the next turn and never in the middle of one.
type Registry struct {
	layers Layers
	mu     sync.Mutex // serialises reloads
	order  IndexOrder
	cur    atomic.Pointer[Catalog]
}

// NewRegistry loads the layers once.
func NewRegistry(l Layers) (*Registry, error) {
	r := &Registry{layers: l}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Catalog returns the current snapshot; it is never half-loaded.
func (r *Registry) Catalog() *Catalog { return r.cur.Load() }

// Reload rescans the layers and publishes the new catalog. On error the
// previous catalog stays current.
func (r *Registry) Reload() (*Catalog, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := Load(r.layers)
	if err != nil {
		return nil, err
	}
	c = c.WithOrder(r.order)
	r.cur.Store(c)
	return c, nil
}

// SetIndexOrder makes the index follow o, now and at every reload. o is
// configuration (skills.index), so the index stays a function of the
// skills and the configuration.
func (r *Registry) SetIndexOrder(o IndexOrder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = o
	r.cur.Store(r.cur.Load().WithOrder(o))
}
