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
	order  func() IndexOrder
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
	if r.order != nil {
		c = c.WithOrder(r.order())
	}
	r.cur.Store(c)
	return c, nil
}

// SetIndexOrder makes the index follow order, read now and at every
// reload (never per turn: the index must stay byte-identical between
// reloads for prompt caches).
func (r *Registry) SetIndexOrder(order func() IndexOrder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = order
	r.cur.Store(r.cur.Load().WithOrder(order()))
}
