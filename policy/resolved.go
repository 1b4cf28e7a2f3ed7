package policy

import (
	"sync"
	"sync/atomic"
)

// Resolve returns the effective policy of s. Every message asks it, so
// the answer for a scope is kept (the Resolver never changes; a config
// reload is a new Resolver); the Effective is shared and read-only.
func (r *Resolver) Resolve(s Scope) *Effective {
	if e := r.resolved.load(s); e != nil {
		return e
	}
	e := r.resolve(s)
	r.resolved.store(s, e)
	return e
}

// maxResolved bounds the scopes a Resolver keeps: a chat is a scope, an
// Effective is about 1.2 KB, and past this many (some 1.4 MB) the kept
// ones are dropped and resolved again, a few microseconds each.
const maxResolved = 1024

// resolvedScopes is Resolve's memory of the scopes it answered.
type resolvedScopes struct {
	m sync.Map // Scope → *Effective
	n atomic.Int64
}

// load returns the kept Effective of s, or nil.
func (c *resolvedScopes) load(s Scope) *Effective {
	if e, ok := c.m.Load(s); ok {
		return e.(*Effective)
	}
	return nil
}

// store keeps e as s's Effective, dropping every kept one first when
// there are maxResolved.
func (c *resolvedScopes) store(s Scope, e *Effective) {
	if c.n.Add(1) > maxResolved {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(s, e)
}
