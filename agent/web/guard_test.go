package web

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFetchRefusesEveryInternalAddress is the guard's table: every class of
// address web_fetch must never reach, in every spelling that names it. None
// of them may be resolved or dialed, and the refusal names the class.
func TestFetchRefusesEveryInternalAddress(t *testing.T) {
	cases := []struct {
		url, class string
	}{
		// IPv4 loopback in the spellings browsers and libc accept.
		{"http://127.0.0.1/", classLoopback},
		{"http://127.0.0.1./", classLoopback},
		{"http://127.1/", classLoopback},
		{"http://127.0.1/", classLoopback},
		{"http://2130706433/", classLoopback},
		{"http://0x7f000001/", classLoopback},
		{"http://0x7f.1/", classLoopback},
		{"http://0X7F.0.0.1/", classLoopback},
		{"http://017700000001/", classLoopback},
		{"http://0177.0.0.1/", classLoopback},
		{"http://127.000.000.001/", classLoopback},
		{"http://127.255.255.254:8080/", classLoopback},
		{"http://１２７。０。０。１/", classLoopback},
		// Names that never leave the machine.
		{"http://localhost/", classLoopback},
		{"http://LOCALHOST./", classLoopback},
		{"http://api.localhost:9090/", classLoopback},
		// Unspecified, private, CGNAT, link-local.
		{"http://0.0.0.0/", classUnspecified},
		{"http://0/", classUnspecified},
		{"http://10.0.0.1/", classPrivate},
		{"http://10.255.255.255/", classPrivate},
		{"http://172.16.0.1/", classPrivate},
		{"http://172.31.255.254/", classPrivate},
		{"http://192.168.1.1/", classPrivate},
		{"http://3232235777/", classPrivate}, // 192.168.1.1
		{"http://100.64.0.1/", classCGNAT},
		{"http://100.127.255.254/", classCGNAT},
		{"http://169.254.1.1/", classLinkLocal},
		// Multicast, broadcast, reserved, documentation, benchmarking.
		{"http://224.0.0.1/", classMulticast},
		{"http://239.255.255.250:1900/", classMulticast},
		{"http://255.255.255.255/", classBroadcast},
		{"http://240.0.0.1/", classReserved},
		{"http://192.0.0.8/", classReserved},
		{"http://192.0.2.10/", classDocs},
		{"http://198.51.100.7/", classDocs},
		{"http://203.0.113.9/", classDocs},
		{"http://198.18.0.1/", classBenchmark},
		// Cloud metadata, by address and by name.
		{"http://169.254.169.254/latest/meta-data/", classMetadata},
		{"http://0xa9fea9fe/", classMetadata},
		{"http://169.254.170.2/v2/credentials", classMetadata},
		{"http://100.100.100.200/latest/meta-data/", classMetadata},
		{"http://metadata.google.internal/computeMetadata/v1/", classMetadata},
		{"http://metadata.google.internal./computeMetadata/v1/", classMetadata},
		{"http://METADATA.goog/", classMetadata},
		{"http://metadata.tencentyun.com/", classMetadata},
		{"http://instance-data/latest/", classMetadata},
		{"http://[fd00:ec2::254]/latest/meta-data/", classMetadata},
		{"http://[::ffff:169.254.169.254]/", classMetadata},
		{"http://[64:ff9b::a9fe:a9fe]/", classMetadata},
		// IPv6 and IPv4 inside IPv6.
		{"http://[::1]/", classLoopback},
		{"http://[0:0:0:0:0:0:0:1]:8080/", classLoopback},
		{"http://[::]/", classUnspecified},
		{"http://[::ffff:127.0.0.1]/", classLoopback},
		{"http://[::ffff:7f00:1]/", classLoopback},
		{"http://[::ffff:10.0.0.1]/", classPrivate},
		{"http://[::ffff:192.168.0.1]/", classPrivate},
		{"http://[::127.0.0.1]/", classReserved},
		{"http://[64:ff9b::7f00:1]/", classLoopback + " (embedded IPv4)"},
		{"http://[64:ff9b::a00:1]/", classPrivate + " (embedded IPv4)"},
		{"http://[2002:7f00:1::]/", classLoopback + " (embedded IPv4)"},
		{"http://[2002:c0a8:101::1]/", classPrivate + " (embedded IPv4)"},
		{"http://[64:ff9b:1::a00:1]/", classPrivate},
		{"http://[fe80::1]/", classLinkLocal},
		{"http://[febf:ffff::1]/", classLinkLocal},
		{"http://[fc00::1]/", classULA},
		{"http://[fd12:3456:789a::1]/", classULA},
		{"http://[fec0::1]/", classSiteLocal},
		{"http://[ff02::1]/", classMulticast},
		{"http://[ff05::1:3]/", classMulticast},
		{"http://[2001:db8::1]/", classDocs},
		{"http://[3fff::1]/", classDocs},
		{"http://[2001::1]/", classTeredo},
		{"http://[2001:10::1]/", classReserved},
		{"http://[100::1]/", classReserved},
		{"http://[5f00::1]/", classReserved},
		{"http://[4000::1]/", classNonGlobal},
	}
	h := newFetchHarness(t, FetchConfig{})
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			_, err := h.fetch(t, c.url, 0)
			var blocked *BlockedError
			if !errors.As(err, &blocked) {
				t.Fatalf("want a refusal, got %v", err)
			}
			if blocked.Class != c.class {
				t.Errorf("class %q, want %q", blocked.Class, c.class)
			}
			if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.class) {
				t.Errorf("message does not say what was refused: %v", err)
			}
		})
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("internal addresses were dialed: %v", d)
	}
	h.net.mu.Lock()
	defer h.net.mu.Unlock()
	if len(h.net.lookups) != 0 {
		t.Errorf("refused hosts were looked up: %v", h.net.lookups)
	}
}

// TestFetchReachesPublicSpellings: the same unwrapping that refuses
// internal addresses lets public ones through, and the address dialed is
// the unwrapped one.
func TestFetchReachesPublicSpellings(t *testing.T) {
	cases := []struct{ url, dial string }{
		{"http://93.184.215.14/", "93.184.215.14:80"},
		{"http://1572394766/", "93.184.215.14:80"},
		{"http://0x5d.0xb8.0xd7.0x0e/", "93.184.215.14:80"},
		{"http://[::ffff:93.184.215.14]:8080/", "93.184.215.14:8080"},
		{"http://[64:ff9b::5db8:d70e]/", "[64:ff9b::5db8:d70e]:80"},
		{"http://[2606:4700::1111]/", "[2606:4700::1111]:80"},
	}
	h := newFetchHarness(t, FetchConfig{})
	ok := text("text/plain", "public page")
	h.net.serve(t, publicIP, ok)
	h.net.serve(t, "64:ff9b::5db8:d70e", ok)
	h.net.serve(t, "2606:4700::1111", ok)
	for _, c := range cases {
		before := len(h.net.dials())
		got, err := h.fetch(t, c.url, 0)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		mustContain(t, got, "public page")
		if d := h.net.dials()[before:]; len(d) != 1 || d[0] != c.dial {
			t.Errorf("%s dialed %v, want [%s]", c.url, d, c.dial)
		}
	}
}

func TestFetchRefusesBadURLs(t *testing.T) {
	cases := []struct{ url, want string }{
		{"file:///etc/passwd", `scheme "file"`},
		{"ftp://ftp.example.org/x", `scheme "ftp"`},
		{"gopher://example.org/", `scheme "gopher"`},
		{"javascript:alert(1)", `scheme "javascript"`},
		{"example.org/page", "needs a scheme"},
		{"http://user:pw@example.org/", "user names or passwords"},
		{"http://example.org@127.0.0.1/", "user names or passwords"},
		{"http:///path", "no host"},
		{"http://[fe80::1%25eth0]/", "zone"},
		{"http://256.0.0.1/", "not a valid IPv4"},
		{"http://1.2.3.4.5/", "not a valid IPv4"},
		{"http://0x1g.1/", "not a valid IPv4"},
		{"http://-bad-.org/", "not a valid name"},
		{"http://08.0.0.1/", "not a valid IPv4"},
		{"http://exa mple.org/", "invalid URL"},
		{"http://%31%32%37.0.0.1/", "invalid URL escape"},
		{"http://a..b/", "not a valid name"},
		{"http://example.org:0/", "bad port"},
		{"http://example.org:99999/", "bad port"},
		{"http://" + strings.Repeat("a", 2100) + ".org/", "longer than"},
	}
	h := newFetchHarness(t, FetchConfig{})
	for _, c := range cases {
		_, err := h.fetch(t, c.url, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.url, err, c.want)
		}
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("bad URLs were dialed: %v", d)
	}
}

func TestFetchRefusesNamesThatResolveInternally(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	h.net.name("evil.example", "10.0.0.7")
	h.net.name("loop.example", "127.0.0.1")
	h.net.name("meta.example", "169.254.169.254")
	h.net.name("mapped.example", "::ffff:192.168.1.10")
	h.net.name("ula.example", "fd00::1234")
	// One private record among public ones is enough to refuse the name.
	h.net.name("mixed.example", publicIP, "127.0.0.1")
	h.net.serve(t, publicIP, text("text/plain", "must not be served"))

	cases := map[string]string{
		"http://evil.example/":   classPrivate,
		"http://loop.example/":   classLoopback,
		"http://meta.example/":   classMetadata,
		"http://mapped.example/": classPrivate,
		"http://ula.example/":    classULA,
		"http://mixed.example/":  classLoopback,
	}
	for u, class := range cases {
		_, err := h.fetch(t, u, 0)
		var blocked *BlockedError
		if !errors.As(err, &blocked) || blocked.Class != class || !blocked.Resolved {
			t.Errorf("%s: got %v, want a refusal as %s", u, err, class)
			continue
		}
		mustContain(t, err.Error(), "resolves to a "+class)
		// The refusal names the class, not the internal address.
		mustNotContain(t, err.Error(), "10.0.0.7", "127.0.0.1", "169.254", "192.168", "fd00")
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("refused names were dialed: %v", d)
	}
	mustContain(t, h.logs.String(), `"msg":"web_fetch refused an address"`, `"host":"evil.example"`, `"class":"private"`)
}

// TestFetchDialsTheAddressItChecked: a resolver that answers a public
// address first and loopback on every later lookup (DNS rebinding) must not
// get its second answer used: the guard looks up once and dials what it
// checked.
func TestFetchDialsTheAddressItChecked(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	h.net.lookup = func(host string, n int) []netip.Addr {
		if n == 1 {
			return []netip.Addr{netip.MustParseAddr(publicIP)}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	h.net.serve(t, publicIP, text("text/plain", "the public page"))
	got, err := h.fetch(t, "http://rebind.example/", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, got, "the public page")
	if n := h.net.lookupCount("rebind.example"); n != 1 {
		t.Errorf("looked up %d times, want 1", n)
	}
	if d := h.net.dials(); len(d) != 1 || d[0] != publicIP+":80" {
		t.Errorf("dialed %v, want only the checked %s", d, publicIP)
	}
}

// TestFetchRefusesRedirectsInside: a public page redirecting to loopback,
// to a name that resolves privately and to metadata is refused at the
// redirect, and the internal server never sees a request.
func TestFetchRefusesRedirectsInside(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	var internalHits atomic.Int32
	internal := h.net.serve(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		_, _ = w.Write([]byte("secret"))
	}))
	h.net.name("public.example", publicIP)
	h.net.name("intranet.example", "10.1.2.3")
	targets := map[string]string{
		"/to-loopback": internal.URL + "/admin",
		"/to-intranet": "http://intranet.example/wiki",
		"/to-metadata": "http://169.254.169.254/latest/meta-data/iam/",
		"/to-mapped":   "http://[::ffff:127.0.0.1]/",
		"/to-file":     "file:///etc/passwd",
	}
	h.net.serve(t, publicIP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
	}))
	want := map[string]string{
		"/to-loopback": "127.0.0.1 is a loopback address",
		"/to-intranet": "intranet.example resolves to a private address",
		"/to-metadata": "169.254.169.254 is a cloud metadata address",
		"/to-mapped":   "is a loopback address",
		"/to-file":     `refused: scheme "file"`,
	}
	for path, msg := range want {
		_, err := h.fetch(t, "http://public.example"+path, 0)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v, want %q", path, err, msg)
		}
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal server was reached %d times", n)
	}
	for _, d := range h.net.dials() {
		if d != publicIP+":80" {
			t.Errorf("dialed %s", d)
		}
	}
}

func TestFetchAllowList(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{AllowPrivate: []string{
		"10.20.0.0/16", "192.168.7.7", "wiki.corp.example", "*.docs.corp.example", "169.254.0.0/16", "localhost",
	}})
	page := text("text/plain", "intranet docs")
	h.net.serve(t, "10.20.1.2", page)
	h.net.serve(t, "192.168.5.5", page)
	h.net.serve(t, "172.16.1.1", page)
	h.net.serve(t, "192.168.7.7", page)
	h.net.serve(t, "127.0.0.1", page)
	h.net.name("intranet.corp.example", "10.20.1.2")
	h.net.name("wiki.corp.example", "192.168.5.5")
	h.net.name("api.docs.corp.example", "172.16.1.1")
	h.net.name("other.corp.example", "10.99.0.1")
	h.net.name("docs.corp.example", "172.16.1.1") // the wildcard covers subdomains only
	h.net.name("localhost", "127.0.0.1")

	allowed := []string{
		"http://intranet.corp.example/",
		"http://wiki.corp.example/page",
		"http://api.docs.corp.example/v1",
		"http://10.20.1.2/",
		"http://192.168.7.7/",
		"http://[::ffff:10.20.1.2]/",
		"http://localhost/",
	}
	for _, u := range allowed {
		got, err := h.fetch(t, u, 0)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		mustContain(t, got, "intranet docs")
	}
	refused := []string{
		"http://other.corp.example/",
		"http://docs.corp.example/",
		"http://10.21.0.1/",
		"http://192.168.7.8/",
		// Metadata stays refused although 169.254.0.0/16 is allowed.
		"http://169.254.169.254/latest/meta-data/",
		"http://metadata.google.internal/",
	}
	for _, u := range refused {
		_, err := h.fetch(t, u, 0)
		var blocked *BlockedError
		if !errors.As(err, &blocked) {
			t.Errorf("%s: got %v, want a refusal", u, err)
		}
	}
}

func TestAllowListValidation(t *testing.T) {
	bad := map[string]string{
		"10.0.0.0/33":    "not a CIDR",
		"0.0.0.0/0":      "switch the guard off",
		"::/0":           "switch the guard off",
		"*.":             "domain wildcard",
		"not a host!":    "neither a CIDR",
		"":               "empty entry",
		"http://x.corp/": "not a CIDR",
	}
	for entry, want := range bad {
		err := Config{Fetch: FetchConfig{AllowPrivate: []string{entry}}}.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tools.web_fetch.allow_private") {
			t.Errorf("%q: got %v, want %q", entry, err, want)
		}
	}
	good := FetchConfig{AllowPrivate: []string{"10.0.0.0/8", "fd00::/8", "192.168.1.1", "[fd00::1]", "wiki.corp", "*.corp.example", "Intra_Net.local."}}
	if err := good.Validate(); err != nil {
		t.Errorf("valid allow list refused: %v", err)
	}
}

// TestNumericHostIsNeverAName: a host whose last label is all digits or
// starts with 0x is an IPv4 literal or invalid, never a DNS name to look
// up (a resolver, or a proxy, may read http://0x100000000/ as an address).
func TestNumericHostIsNeverAName(t *testing.T) {
	h := newFetchHarness(t, FetchConfig{})
	for _, u := range []string{
		"http://0x100000000/",
		"http://0x1.0x100000000/",
		"http://example.0x7g/",
		"http://example.0X/",
		"http://99999999999999999999/",
		"http://example.1234567890123/",
	} {
		_, err := h.fetch(t, u, 0)
		if err == nil || !strings.Contains(err.Error(), "not a valid IPv4") {
			t.Errorf("%s: got %v, want it refused as not a valid IPv4 address", u, err)
		}
	}
	if d := h.net.dials(); len(d) != 0 {
		t.Errorf("numeric hosts were dialed: %v", d)
	}
	for _, host := range []string{"0x100000000", "example.0x7g"} {
		if name, _, err := parseHost(host); name != "" || err == nil {
			t.Errorf("parseHost(%q) = name %q, %v; want no name", host, name, err)
		}
	}
}
