package web

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// The SSRF guard. web_fetch takes URLs from the model, and the model takes
// them from users and web pages, so every URL is hostile until proven
// otherwise: it must not reach the gateway itself, the cluster around it or
// the cloud's metadata service. The guard works on addresses, not on
// spellings — a host is canonicalised the way browsers do (so
// "http://0x7f.1/" is 127.0.0.1), resolved, every address is classified,
// and the connection then goes to exactly the address that was checked.

// BlockedError is a refusal by the guard. Its message names the host and
// the class of address, never the resolved address itself, so a refusal
// does not turn the tool into a map of the internal network.
type BlockedError struct {
	Host     string // as the URL spelled it
	Class    string // "loopback", "private", "cloud metadata", …
	Resolved bool   // the class is that of an address the name resolved to
}

func (e *BlockedError) Error() string {
	if e.Resolved {
		return fmt.Sprintf("refused: %s resolves to a %s address; web_fetch reaches only public addresses", e.Host, e.Class)
	}
	return fmt.Sprintf("refused: %s is a %s address; web_fetch reaches only public addresses", e.Host, e.Class)
}

// Address classes the guard names in refusals.
const (
	classUnspecified = "unspecified"
	classLoopback    = "loopback"
	classPrivate     = "private"
	classCGNAT       = "shared (CGNAT)"
	classLinkLocal   = "link-local"
	classMulticast   = "multicast"
	classBroadcast   = "broadcast"
	classReserved    = "reserved"
	classDocs        = "documentation"
	classBenchmark   = "benchmarking"
	classMetadata    = "cloud metadata"
	classULA         = "unique local (ULA)"
	classSiteLocal   = "site-local"
	classNonGlobal   = "non-global"
	classTeredo      = "Teredo"
	classLocalName   = "local"
)

type blockedRange struct {
	prefix netip.Prefix
	class  string
}

// blockedRanges are the special-purpose ranges of the IANA IPv4 and IPv6
// registries that a web page can never legitimately live in. IPv4-mapped,
// NAT64 and 6to4 addresses are unwrapped before this table is consulted,
// so they are judged by the IPv4 address they carry.
var blockedRanges = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), classCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), classDocs},
	{netip.MustParsePrefix("192.88.99.0/24"), classReserved}, // 6to4 relay anycast
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), classBenchmark},
	{netip.MustParsePrefix("198.51.100.0/24"), classDocs},
	{netip.MustParsePrefix("203.0.113.0/24"), classDocs},
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), classBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved},

	{netip.MustParsePrefix("::/128"), classUnspecified},
	{netip.MustParsePrefix("::1/128"), classLoopback},
	{netip.MustParsePrefix("::/96"), classReserved}, // IPv4-compatible, deprecated
	{netip.MustParsePrefix("64:ff9b:1::/48"), classPrivate},
	{netip.MustParsePrefix("100::/64"), classReserved}, // discard-only
	{netip.MustParsePrefix("2001::/32"), classTeredo},
	{netip.MustParsePrefix("2001:db8::/32"), classDocs},
	{netip.MustParsePrefix("2001::/23"), classReserved}, // IETF protocol assignments
	{netip.MustParsePrefix("3fff::/20"), classDocs},
	{netip.MustParsePrefix("5f00::/16"), classReserved}, // SRv6 SIDs
	{netip.MustParsePrefix("fc00::/7"), classULA},
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), classSiteLocal},
	{netip.MustParsePrefix("ff00::/8"), classMulticast},
}

var (
	// globalUnicast6 is where every public IPv6 address lives today; an
	// address outside it is refused even if no table row names it.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// metadataAddrs are cloud instance-metadata endpoints. They hand out
// credentials, so they stay refused even when allow_private covers them.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OCI, OpenStack, Huawei…
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task credentials
	netip.MustParseAddr("169.254.170.23"):  true, // AWS EKS pod identity
	netip.MustParseAddr("169.254.0.23"):    true, // Tencent Cloud
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud (legacy)
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
	netip.MustParseAddr("fd00:ec2::23"):    true, // AWS EKS pod identity over IPv6
}

// metadataNames are the host names of metadata services; they are refused
// by name before any lookup, whatever they would resolve to.
var metadataNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata.tencentyun.com":    true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// classify returns why addr is refused, or "" for a public address.
// metadata reports a cloud metadata address, which no allow list unlocks.
func classify(addr netip.Addr) (class string, metadata bool) {
	addr = addr.WithZone("").Unmap()
	if metadataAddrs[addr] {
		return classMetadata, true
	}
	if addr.Is6() {
		// Addresses that carry an IPv4 address are judged by it: a NAT64
		// or 6to4 gateway would forward to the embedded address.
		b := addr.As16()
		switch {
		case nat64.Contains(addr):
			return classifyEmbedded(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(addr):
			return classifyEmbedded(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, r := range blockedRanges {
		if r.prefix.Contains(addr) {
			return r.class, false
		}
	}
	if addr.Is6() && !globalUnicast6.Contains(addr) {
		return classNonGlobal, false
	}
	return "", false
}

func classifyEmbedded(v4 netip.Addr) (string, bool) {
	class, metadata := classify(v4)
	if class != "" && !metadata {
		class += " (embedded IPv4)"
	}
	return class, metadata
}

// hostIDNA maps a Unicode host the way browsers do for lookups (full-width
// digits and dots become ASCII), without STD3's ban on underscores, which
// real intranet names use.
var hostIDNA = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false))

// Errors parseHost returns.
var (
	errEmptyHost   = errors.New("the URL has no host")
	errBadHost     = errors.New("the host is not a valid name or address")
	errZonedHost   = errors.New("IPv6 zone identifiers are not allowed")
	errBadIPv4Host = errors.New("the host looks numeric but is not a valid IPv4 address")
)

// parseHost canonicalises a URL host (no port, no brackets) as the WHATWG
// URL standard does: IDNA-mapped and lower-cased; a host whose last label
// is numeric is an IPv4 address in any of the legacy spellings
// (2130706433, 0x7f.1, 017700000001, 127.1). It returns either a DNS name
// or an address, never both.
func parseHost(host string) (name string, addr netip.Addr, err error) {
	if host == "" {
		return "", netip.Addr{}, errEmptyHost
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return "", netip.Addr{}, errBadHost
		}
		if a.Zone() != "" {
			return "", netip.Addr{}, errZonedHost
		}
		return "", a, nil
	}
	h := strings.ToLower(host)
	if !isASCII(h) {
		if h, err = hostIDNA.ToASCII(host); err != nil {
			return "", netip.Addr{}, errBadHost
		}
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "", netip.Addr{}, errBadHost
	}
	if endsInNumber(h) {
		a, ok := parseIPv4(h)
		if !ok {
			return "", netip.Addr{}, errBadIPv4Host
		}
		return "", a, nil
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || !validLabel(label) {
			return "", netip.Addr{}, errBadHost
		}
	}
	return h, netip.Addr{}, nil
}

// localName reports names that must never leave the machine or that name a
// metadata service, with the class to refuse them as.
func localName(name string) (string, bool) {
	switch {
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return classLoopback, true
	case metadataNames[name]:
		return classMetadata, true
	}
	return "", false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func validLabel(l string) bool {
	if l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// endsInNumber tells an IPv4 host: the last label is all decimal digits
// or starts with 0x (h is lower-cased). That is wider than the WHATWG test,
// which takes 0x100000000 (too large) or 0x7g (not hex) for a name: no
// public name ends so, and a resolver or proxy may read it as an address,
// so such a host is an address or invalid, never looked up.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// parseIPv4 is the WHATWG IPv4 parser: one to four parts, each decimal,
// octal (leading 0) or hex (0x); the last part fills the remaining bytes.
func parseIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true // "0x" alone is zero, as browsers read it
		}
	case len(p) >= 2 && p[0] == '0':
		p, base = p[1:], 8
	}
	if len(p) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 0xffffffff {
		return 0, false
	}
	return n, true
}

// target is a URL that passed the guard's static checks.
type target struct {
	url  *url.URL
	name string     // DNS name to resolve, or ""
	addr netip.Addr // literal address, when name is ""
}

// checkURL parses raw and applies every check that needs no lookup:
// scheme, credentials, host syntax, local names and literal addresses.
func (g *guard) checkURL(raw string) (target, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return target{}, fmt.Errorf("invalid URL: %w", errors.Unwrap(err))
	}
	return g.checkParsed(u)
}

func (g *guard) checkParsed(u *url.URL) (target, error) {
	switch u.Scheme {
	case "http", "https":
	case "":
		return target{}, errors.New("invalid URL: it needs a scheme, e.g. https://")
	default:
		return target{}, fmt.Errorf("refused: scheme %q; web_fetch reads only http and https URLs", u.Scheme)
	}
	if u.User != nil {
		return target{}, errors.New("refused: URLs with user names or passwords are not fetched")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return target{}, fmt.Errorf("invalid URL: bad port %q", p)
		}
	}
	name, addr, err := parseHost(u.Hostname())
	if err != nil {
		return target{}, fmt.Errorf("invalid URL host %q: %w", u.Hostname(), err)
	}
	t := target{url: u, name: name, addr: addr}
	if name != "" {
		if err := g.checkName(u.Hostname(), name); err != nil {
			return target{}, err
		}
		return t, nil
	}
	if err := g.checkAddr(u.Hostname(), "", addr, false); err != nil {
		return target{}, err
	}
	return t, nil
}

// checkName refuses local and metadata names before any lookup; the allow
// list may open a local name, never a metadata one.
func (g *guard) checkName(host, name string) error {
	class, ok := localName(name)
	if !ok || (class != classMetadata && g.allow.allows(name, netip.Addr{})) {
		return nil
	}
	return &BlockedError{Host: host, Class: class}
}

// checkAddr refuses addr unless it is public or allowed; name is the DNS
// name it came from ("" for a literal).
func (g *guard) checkAddr(host, name string, addr netip.Addr, resolved bool) error {
	class, metadata := classify(addr)
	if class == "" {
		return nil
	}
	if !metadata && g.allow.allows(name, addr.Unmap()) {
		return nil
	}
	return &BlockedError{Host: host, Class: class, Resolved: resolved}
}
