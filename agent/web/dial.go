package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Resolver looks up a host name's addresses. *net.Resolver implements it;
// tests supply their own so that any name can point anywhere.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens connections. *net.Dialer implements it; tests supply their
// own to route the checked addresses to local test servers.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// maxAddrsTried bounds the addresses one connection attempt walks through,
// so a name with a hundred records cannot stretch a call.
const maxAddrsTried = 4

// guard holds the SSRF rules and is the transport's only way out: every
// connection, the first and each redirect's, goes through DialContext,
// which checks the addresses and then dials exactly those.
type guard struct {
	allow    allowList
	resolver Resolver
	dialer   Dialer
}

func newGuard(allow allowList, r Resolver, d Dialer) *guard {
	if r == nil {
		r = net.DefaultResolver
	}
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	return &guard{allow: allow, resolver: r, dialer: d}
}

// DialContext resolves address's host, refuses the connection if any of its
// addresses is not public (a name with one private record is a rebinding
// attempt or a misconfiguration, and both deserve a refusal), and dials the
// checked addresses in order. The address dialed is the address checked:
// nothing is looked up twice.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("web: dial %q: %w", address, err)
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, a := range addrs {
		if i == maxAddrsTried {
			break
		}
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("could not connect to %s: %w", host, errors.Join(errs...))
}

// resolve returns the checked addresses of host: the literal itself, or
// every address the name resolves to when all of them pass.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	name, addr, err := parseHost(host)
	if err != nil {
		return nil, fmt.Errorf("invalid host %q: %w", host, err)
	}
	if name == "" {
		if err := g.checkAddr(host, "", addr, false); err != nil {
			return nil, err
		}
		return []netip.Addr{addr.Unmap()}, nil
	}
	if err := g.checkName(host, name); err != nil {
		return nil, err
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, fmt.Errorf("no such host: %s", host)
		}
		return nil, fmt.Errorf("could not resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no such host: %s", host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a.Zone() != "" {
			return nil, &BlockedError{Host: host, Class: classLinkLocal, Resolved: true}
		}
		if err := g.checkAddr(host, name, a, true); err != nil {
			return nil, err
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}
