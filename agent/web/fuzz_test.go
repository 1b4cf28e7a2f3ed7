package web

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParseHost checks the host canonicaliser's promises on any input: it
// never panics, it returns a name or an address but not both, a name is
// lower-case LDH labels (underscores allowed) that parse to themselves, and
// an address reparses to itself from its own spelling.
func FuzzParseHost(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzParseHost.
	f.Fuzz(func(t *testing.T, host string) {
		name, addr, err := parseHost(host)
		if err != nil {
			if name != "" || addr.IsValid() {
				t.Fatalf("error %v with a result %q %v", err, name, addr)
			}
			return
		}
		if (name == "") == !addr.IsValid() {
			t.Fatalf("%q: name %q and address %v", host, name, addr)
		}
		if addr.IsValid() {
			again, back, err := parseHost(addr.String())
			if err != nil || again != "" || back != addr {
				t.Fatalf("%q -> %v does not reparse: %q %v %v", host, addr, again, back, err)
			}
			return
		}
		if name != strings.ToLower(name) || strings.HasSuffix(name, ".") || !isASCII(name) {
			t.Fatalf("%q -> name %q is not canonical", host, name)
		}
		again, _, err := parseHost(name)
		if err != nil || again != name {
			t.Fatalf("%q -> %q reparses to %q, %v", host, name, again, err)
		}
	})
}

// FuzzCheckURL checks the guard's static checks on any URL: no panic, and
// whatever passes is http(s) with a host that is either a public address or
// a name that is neither local nor a metadata service.
func FuzzCheckURL(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzCheckURL.
	g := newGuard(allowList{}, nil, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := g.checkURL(raw)
		if err != nil {
			var blocked *BlockedError
			if errors.As(err, &blocked) && blocked.Class == "" {
				t.Fatalf("%q: a refusal without a class", raw)
			}
			return
		}
		if tg.url.Scheme != "http" && tg.url.Scheme != "https" {
			t.Fatalf("%q passed with scheme %q", raw, tg.url.Scheme)
		}
		if tg.url.User != nil {
			t.Fatalf("%q passed with credentials", raw)
		}
		if tg.addr.IsValid() {
			if class, _ := classify(tg.addr); class != "" {
				t.Fatalf("%q passed with a %s address %v", raw, class, tg.addr)
			}
			return
		}
		if _, local := localName(tg.name); local || tg.name == "" {
			t.Fatalf("%q passed with host name %q", raw, tg.name)
		}
		if _, err := netip.ParseAddr(tg.name); err == nil {
			t.Fatalf("%q passed an address as the name %q", raw, tg.name)
		}
	})
}
