package policy

import (
	"sync"
	"sync/atomic"
)

// Resolve returns the effective policy of s. Every message asks it, so
// the answer is kept (the Resolver never changes; a config reload is a
// new Resolver) under the part of s it depends on: every chat the tree
// does not name shares one answer with the others of its workspace, so
// what is kept grows with the configuration, not with the chats. The
// Effective is shared and read-only.
func (r *Resolver) Resolve(s Scope) *Effective {
	k := r.keyOf(s)
	if e := r.resolved.load(k); e != nil {
		return e
	}
	e := r.resolve(s)
	r.resolved.store(k, e)
	return e
}

// resolvedKey is what a scope's Effective depends on (see tree): its
// platform and account, and its workspace and chat where the tree has a
// level for them; asked says how deep the scope goes, since a scope
// without a chat (or a workspace) stops there.
type resolvedKey struct {
	channel, account, workspace, chat string
	asked                             int8 // 0: the platform, 1: a workspace, 2: a chat
}

// keyOf is s's resolvedKey.
func (r *Resolver) keyOf(s Scope) resolvedKey {
	if !r.isPlatform(s.Channel) {
		return resolvedKey{channel: s.Channel}
	}
	k := resolvedKey{channel: s.Channel, account: s.Account}
	switch {
	case s.Chat != "":
		k.asked = 2
	case s.Workspace != "":
		k.asked = 1
	default:
		return k
	}
	wp, ok := r.p.Platforms[s.Channel].Workspaces[s.Workspace]
	if !ok {
		return k // neither level is in the tree
	}
	k.workspace = s.Workspace
	if _, ok := wp.Chats[s.Chat]; ok && k.asked == 2 {
		k.chat = s.Chat
	}
	return k
}

// maxResolved bounds the answers a Resolver keeps, past what a
// configuration names (an Effective is about 1.2 KB): past this many
// (some 1.4 MB) the kept ones are dropped and resolved again, a few
// microseconds each.
const maxResolved = 1024

// resolvedScopes is Resolve's memory of the answers it gave.
type resolvedScopes struct {
	m sync.Map // resolvedKey → *Effective
	n atomic.Int64
}

// load returns the kept Effective of k, or nil.
func (c *resolvedScopes) load(k resolvedKey) *Effective {
	if e, ok := c.m.Load(k); ok {
		return e.(*Effective)
	}
	return nil
}

// store keeps e as k's Effective, dropping every kept one first when
// there are maxResolved.
func (c *resolvedScopes) store(k resolvedKey, e *Effective) {
	if c.n.Add(1) > maxResolved {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(k, e)
}
