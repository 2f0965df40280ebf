package web

import (
	"fmt"
	"net/netip"
	"sync"
)

// The address rules follow the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (https://www.iana.org/assignments/iana-ipv4-special-registry,
// https://www.iana.org/assignments/iana-ipv6-special-registry; RFC 6890 and
// the RFCs each entry names), as they stood in 2025: every block whose
// "Globally Reachable" is False or N/A is refused, and the blocks marked True
// inside a refused one are carved out again (reachableBlocks, below). Two
// blocks the registry marks True are refused all the same (ORCHIDv2 and
// DRIP, see refusedBlocks). Multicast (its own registry), site-local, IPv4-translated
// addresses and every IPv6 address outside global unicast 2000::/3 are
// refused too: none of them is a public service on the Internet.

// special is a block with how a refusal names it.
type special struct {
	prefix netip.Prefix
	kind   string
}

// addrTables are the address rules' tables. They are built on first use,
// not at package init: the wasm guest links this package to declare
// http_request but never checks an address, and building them at init
// cost it ~17 KB of code and some fifty parses at every boot.
type addrTables struct {
	refused   []special
	reachable []netip.Prefix
	// globalUnicast is 2000::/3; compatible, nat64 and sixToFour the IPv6
	// forms that embed an IPv4 address (embeddedIPv4).
	globalUnicast, compatible, nat64, sixToFour netip.Prefix
	// loopbackNames are the addresses a ".localhost" name stands for.
	loopbackNames []netip.Addr
}

var (
	tablesOnce  sync.Once
	tablesBuilt *addrTables
)

// tables returns the address rules' tables, building them once.
func tables() *addrTables {
	tablesOnce.Do(func() { tablesBuilt = buildTables() })
	return tablesBuilt
}

func buildTables() *addrTables {
	return &addrTables{
		refused:       refusedBlocks(),
		reachable:     reachableBlocks(),
		globalUnicast: netip.MustParsePrefix("2000::/3"),
		compatible:    netip.MustParsePrefix("::/96"),
		nat64:         netip.MustParsePrefix("64:ff9b::/96"),
		sixToFour:     netip.MustParsePrefix("2002::/16"),
		loopbackNames: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	}
}

// refusedBlocks are the blocks a request may not reach unless an allow
// rule names them. IPv4-mapped addresses (::ffff:0:0/96, not globally reachable as
// such) are judged by the IPv4 address they map to, since that is what a
// socket connects to; NAT64 64:ff9b::/96 (globally reachable) and 6to4
// 2002::/16 (N/A) by the IPv4 address they embed (embeddedIPv4).
func refusedBlocks() []special {
	blocks := [...]struct{ prefix, kind string }{
		// IPv4 registry.
		{"0.0.0.0/8", "an unspecified address"}, // "this network", RFC 791
		{"10.0.0.0/8", "a private address"},
		{"100.64.0.0/10", "a carrier-grade NAT address"},
		{"127.0.0.0/8", "a loopback address"},
		{"169.254.0.0/16", "a link-local address"},
		{"172.16.0.0/12", "a private address"},
		{"192.0.0.0/24", "a reserved address"}, // IETF protocol assignments, DS-Lite, NAT64 discovery
		{"192.0.2.0/24", "a documentation address"},
		{"192.88.99.0/24", "a deprecated 6to4 relay address"}, // RFC 7526
		{"192.168.0.0/16", "a private address"},
		{"198.18.0.0/15", "a benchmarking address"},
		{"198.51.100.0/24", "a documentation address"},
		{"203.0.113.0/24", "a documentation address"},
		{"224.0.0.0/4", "a multicast address"},
		{"240.0.0.0/4", "a reserved address"}, // and 255.255.255.255, limited broadcast

		// IPv6 registry.
		{"::/128", "an unspecified address"},
		{"::1/128", "a loopback address"},
		{"::ffff:0:0:0/96", "an IPv4-translated address"}, // RFC 2765's SIIT form, not routed
		{"64:ff9b:1::/48", "a local-use NAT64 address"},   // RFC 8215
		{"100::/64", "a discard-only address"},
		{"100:0:0:1::/64", "a reserved address"}, // dummy prefix, RFC 9780
		{"2001::/32", "a Teredo address"},
		{"2001:2::/48", "a benchmarking address"},
		{"2001:10::/28", "a deprecated ORCHID address"},
		// ORCHIDv2 (RFC 7343) and DRIP entity tags (RFC 9374) are marked
		// globally reachable, but they are cryptographic host identifiers, not
		// locators: nothing on the Internet routes to them, and only a HIP
		// stack on this host or its network could answer one. Refused.
		{"2001:20::/28", "an ORCHIDv2 identifier"},
		{"2001:30::/28", "a DRIP entity tag"},
		{"2001::/23", "a reserved address"}, // IETF protocol assignments
		{"2001:db8::/32", "a documentation address"},
		{"3fff::/20", "a documentation address"}, // RFC 9637
		{"5f00::/16", "a reserved address"},      // SRv6 SIDs, RFC 9602
		{"fc00::/7", "a private address"},
		{"fe80::/10", "a link-local address"},
		{"fec0::/10", "a private address"}, // site-local, deprecated
		{"ff00::/8", "a multicast address"},
	}
	out := make([]special, len(blocks))
	for i, b := range blocks {
		out[i] = special{netip.MustParsePrefix(b.prefix), b.kind}
	}
	return out
}

// reachableBlocks are the registry's globally reachable entries inside a
// refused block; they are allowed.
func reachableBlocks() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("192.0.0.9/32"),    // Port Control Protocol anycast, RFC 7723
		netip.MustParsePrefix("192.0.0.10/32"),   // TURN anycast, RFC 8155
		netip.MustParsePrefix("2001:1::1/128"),   // Port Control Protocol anycast, RFC 7723
		netip.MustParsePrefix("2001:1::2/128"),   // TURN anycast, RFC 8155
		netip.MustParsePrefix("2001:1::3/128"),   // DNS-SD SRP anycast, RFC 9665
		netip.MustParsePrefix("2001:3::/32"),     // AMT, RFC 7450
		netip.MustParsePrefix("2001:4:112::/48"), // AS112-v6, RFC 7535
	}
}

// classify names the kind of a refused address, or returns "" for a
// globally reachable one. It knows nothing of this host's own addresses
// (see Egress.denial).
func classify(addr netip.Addr) string {
	addr = addr.WithZone("")
	if addr.Is4In6() {
		return classify(addr.Unmap())
	}
	t := tables()
	for _, p := range t.reachable {
		if p.Contains(addr) {
			return ""
		}
	}
	for _, r := range t.refused {
		if r.prefix.Contains(addr) {
			return r.kind
		}
	}
	if v4, form, ok := embeddedIPv4(addr); ok {
		if kind := classify(v4); kind != "" {
			return fmt.Sprintf("%s (%s in %s form)", kind, v4, form)
		}
		return ""
	}
	if addr.Is6() && !t.globalUnicast.Contains(addr) {
		// Everything else outside 2000::/3 is reserved by the IETF and
		// unallocated: no public service lives there.
		return "a reserved address"
	}
	return ""
}

// embeddedIPv4 finds the IPv4 address inside an IPv6 form that routes to
// it: IPv4-compatible (::a.b.c.d, deprecated), NAT64's well-known prefix
// (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::/48). The local-use NAT64
// prefix 64:ff9b:1::/48 is refused outright instead: it is not globally
// reachable, and its /48 layout splits the IPv4 address around a reserved
// octet.
func embeddedIPv4(addr netip.Addr) (netip.Addr, string, bool) {
	if !addr.Is6() || addr.Is4In6() {
		return netip.Addr{}, "", false
	}
	b, t := addr.As16(), tables()
	switch {
	case t.compatible.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	case t.nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case t.sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}

// addrForms are the addresses a socket to addr may reach: addr itself, the
// IPv4 address it maps to, and the IPv4 address an IPv6 form embeds.
func addrForms(addr netip.Addr) []netip.Addr {
	addr = addr.WithZone("")
	forms := []netip.Addr{addr}
	if addr.Is4In6() {
		forms = append(forms, addr.Unmap())
	}
	if v4, _, ok := embeddedIPv4(addr); ok {
		forms = append(forms, v4)
	}
	return forms
}
