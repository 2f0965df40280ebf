package web_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// registryEntry is one entry of the IANA IPv4 or IPv6 Special-Purpose
// Address Registry (https://www.iana.org/assignments/iana-ipv4-special-registry
// and .../iana-ipv6-special-registry, as of 2025).
type registryEntry struct {
	block string
	name  string
	// global is the registry's "Globally Reachable" column.
	global string
	// allowed is revenant's decision for the block's first and last
	// address: true exactly when global is "True", except where noted.
	allowed bool
	// judged blocks embed an IPv4 address and are decided by it; only
	// their samples are checked.
	judged bool
	// samples are more addresses in the block, with the decision for each.
	samples map[string]bool
}

var specialRegistry = []registryEntry{
	// IPv4.
	{block: "0.0.0.0/8", name: `"This network"`, global: "False"},
	{block: "0.0.0.0/32", name: `"This host on this network"`, global: "False"},
	{block: "10.0.0.0/8", name: "Private-Use", global: "False"},
	{block: "100.64.0.0/10", name: "Shared Address Space", global: "False"},
	{block: "127.0.0.0/8", name: "Loopback", global: "False"},
	{block: "169.254.0.0/16", name: "Link Local", global: "False"},
	{block: "172.16.0.0/12", name: "Private-Use", global: "False"},
	{block: "192.0.0.0/24", name: "IETF Protocol Assignments", global: "False"},
	{block: "192.0.0.0/29", name: "IPv4 Service Continuity Prefix", global: "False"},
	{block: "192.0.0.8/32", name: "IPv4 dummy address", global: "False"},
	{block: "192.0.0.9/32", name: "Port Control Protocol Anycast", global: "True", allowed: true},
	{block: "192.0.0.10/32", name: "Traversal Using Relays around NAT Anycast", global: "True", allowed: true},
	{block: "192.0.0.170/32", name: "NAT64/DNS64 Discovery", global: "False"},
	{block: "192.0.0.171/32", name: "NAT64/DNS64 Discovery", global: "False"},
	{block: "192.0.2.0/24", name: "Documentation (TEST-NET-1)", global: "False"},
	{block: "192.31.196.0/24", name: "AS112-v4", global: "True", allowed: true},
	{block: "192.52.193.0/24", name: "AMT", global: "True", allowed: true},
	{block: "192.88.99.0/24", name: "Deprecated (6to4 Relay Anycast)", global: "N/A", samples: map[string]bool{"192.88.99.1": false, "192.88.99.2": false}},
	{block: "192.168.0.0/16", name: "Private-Use", global: "False"},
	{block: "192.175.48.0/24", name: "Direct Delegation AS112 Service", global: "True", allowed: true},
	{block: "198.18.0.0/15", name: "Benchmarking", global: "False"},
	{block: "198.51.100.0/24", name: "Documentation (TEST-NET-2)", global: "False"},
	{block: "203.0.113.0/24", name: "Documentation (TEST-NET-3)", global: "False"},
	{block: "240.0.0.0/4", name: "Reserved", global: "False"},
	{block: "255.255.255.255/32", name: "Limited Broadcast", global: "False"},

	// IPv6.
	{block: "::1/128", name: "Loopback Address", global: "False"},
	{block: "::/128", name: "Unspecified Address", global: "False"},
	// A socket to a mapped address connects to the IPv4 address: judged by it.
	{block: "::ffff:0:0/96", name: "IPv4-mapped Address", global: "False", judged: true, samples: map[string]bool{
		"::ffff:0.0.0.0": false, "::ffff:127.0.0.1": false, "::ffff:192.0.2.1": false, "::ffff:203.0.113.9": false,
		"::ffff:8.8.8.8": true,
	}},
	{block: "64:ff9b::/96", name: "IPv4-IPv6 Translat.", global: "True", judged: true, samples: map[string]bool{
		"64:ff9b::808:808": true, "64:ff9b::c000:201": false, "64:ff9b::a00:1": false, "64:ff9b::7f00:1": false,
	}},
	{block: "64:ff9b:1::/48", name: "IPv4-IPv6 Translat. (local-use)", global: "False", samples: map[string]bool{"64:ff9b:1:808:8:800::": false}},
	{block: "100::/64", name: "Discard-Only Address Block", global: "False"},
	{block: "100:0:0:1::/64", name: "Dummy IPv6 Prefix", global: "False"},
	{block: "2001::/23", name: "IETF Protocol Assignments", global: "False", samples: map[string]bool{"2001:1::4": false, "2001:5::1": false}},
	{block: "2001::/32", name: "TEREDO", global: "N/A"},
	{block: "2001:1::1/128", name: "Port Control Protocol Anycast", global: "True", allowed: true},
	{block: "2001:1::2/128", name: "Traversal Using Relays around NAT Anycast", global: "True", allowed: true},
	{block: "2001:1::3/128", name: "DNS-SD Service Registration Protocol Anycast", global: "True", allowed: true},
	{block: "2001:2::/48", name: "Benchmarking", global: "False"},
	{block: "2001:3::/32", name: "AMT", global: "True", allowed: true},
	{block: "2001:4:112::/48", name: "AS112-v6", global: "True", allowed: true},
	{block: "2001:10::/28", name: "Deprecated (previously ORCHID)", global: "N/A"},
	// Marked globally reachable, refused all the same: host identifiers
	// that nothing routes to (special.go).
	{block: "2001:20::/28", name: "ORCHIDv2", global: "True", allowed: false},
	{block: "2001:30::/28", name: "Drone Remote ID Protocol Entity Tags (DETs) Prefix", global: "True", allowed: false},
	{block: "2001:db8::/32", name: "Documentation", global: "False"},
	{block: "2002::/16", name: "6to4", global: "N/A", judged: true, samples: map[string]bool{
		"2002:808:808::1": true, "2002:c000:201::1": false, "2002:a9fe:a9fe::1": false, "2002:7f00:1::": false,
	}},
	{block: "2620:4f:8000::/48", name: "Direct Delegation AS112 Service", global: "True", allowed: true},
	{block: "3fff::/20", name: "Documentation", global: "False"},
	{block: "5f00::/16", name: "Segment Routing (SRv6) SIDs", global: "False"},
	{block: "fc00::/7", name: "Unique-Local", global: "False"},
	{block: "fe80::/10", name: "Link-Local Unicast", global: "False"},
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// noHostAddrs keeps this machine's own addresses out of a decision.
func noHostAddrs() ([]netip.Addr, error) { return nil, nil }

// TestSpecialPurposeRegistry: every entry of both registries whose
// Globally Reachable is False or N/A is refused, at its first and last
// address; the entries marked True inside a refused block are allowed.
func TestSpecialPurposeRegistry(t *testing.T) {
	p := dialing().WithLocalAddrs(noHostAddrs)
	check := func(t *testing.T, addr netip.Addr, allowed bool) {
		t.Helper()
		err := p.CheckAddr(addr)
		if allowed {
			require.NoError(t, err, addr.String())
			return
		}
		require.ErrorIs(t, err, web.ErrDenied, addr.String())
	}
	for _, e := range specialRegistry {
		t.Run(e.block+" "+e.name, func(t *testing.T) {
			prefix := netip.MustParsePrefix(e.block)
			require.Equal(t, prefix.Masked(), prefix, "a block in the table is written masked")
			if !e.judged {
				if e.block != "2001:20::/28" && e.block != "2001:30::/28" {
					require.Equal(t, e.global == "True", e.allowed, "the decision follows the registry")
				}
				check(t, prefix.Addr(), e.allowed)
				check(t, lastAddr(prefix), e.allowed)
			}
			for s, allowed := range e.samples {
				a := netip.MustParseAddr(s)
				require.True(t, prefix.Contains(a), "sample %s is in %s", s, e.block)
				check(t, a, allowed)
			}
		})
	}
}

// TestSpecialPurposeNeighbours: outside the registries' blocks, public
// addresses stay allowed, right up to the blocks' edges; every IPv6 address
// outside global unicast 2000::/3 is refused.
func TestSpecialPurposeNeighbours(t *testing.T) {
	p := dialing().WithLocalAddrs(noHostAddrs)
	for _, public := range []string{
		"1.0.0.0", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
		"172.15.255.255", "172.32.0.0", "191.255.255.255", "192.0.1.0", "192.0.3.0", "192.88.98.255", "192.88.100.0",
		"192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0",
		"203.0.112.255", "203.0.114.0", "223.255.255.255",
		"2001:200::", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::", "2003::",
		"2606:4700:4700::1111", "3ffe:ffff::", "3fff:1000::", "::8.8.8.8",
	} {
		require.NoError(t, p.CheckAddr(netip.MustParseAddr(public)), public)
	}
	for _, c := range []struct{ addr, kind string }{
		{"::ffff:0:808:808", "an IPv4-translated address"},
		{"::7f00:1", "a loopback address (127.0.0.1 in IPv4-compatible form)"},
		{"4000::1", "a reserved address"},
		{"1fff:ffff::", "a reserved address"},
		{"e000::", "a reserved address"},
		{"fec0::1", "a private address"},
		{"ff0e::1", "a multicast address"},
		{"239.255.255.250", "a multicast address"},
	} {
		require.EqualError(t, p.CheckAddr(netip.MustParseAddr(c.addr)), "egress denied: "+c.addr+" is "+c.kind)
	}
}

// TestSpecialPurposeReported: the ranges of the report (issue 11, item 10)
// are refused with their names, and an allow rule still opens each.
func TestSpecialPurposeReported(t *testing.T) {
	p := dialing().WithLocalAddrs(noHostAddrs)
	for _, c := range []struct{ addr, kind string }{
		{"192.0.2.1", "a documentation address"},
		{"198.51.100.7", "a documentation address"},
		{"203.0.113.200", "a documentation address"},
		{"192.88.99.1", "a deprecated 6to4 relay address"},
		{"2001:db8::1", "a documentation address"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo address"},
		{"2001:20::1", "an ORCHIDv2 identifier"},
		{"::ffff:0:c000:201", "an IPv4-translated address"},
		{"64:ff9b:1::a00:1", "a local-use NAT64 address"},
		{"3fff::1", "a documentation address"},
	} {
		addr := netip.MustParseAddr(c.addr)
		require.EqualError(t, p.CheckAddr(addr), "egress denied: "+c.addr+" is "+c.kind)
		require.NoError(t, p.WithAllowCIDRs(netip.PrefixFrom(addr, addr.BitLen())).CheckAddr(addr), "allowed by a rule naming it")
	}
}

// TestHostAddressesRefused: an address of this host is refused even when
// it is public, in every form that reaches it, unless an allow rule names
// it; when the host's addresses cannot be listed, public addresses are
// refused rather than waved through.
func TestHostAddressesRefused(t *testing.T) {
	own := func() ([]netip.Addr, error) { return addrs("93.184.216.34", "2606:2800:220:1::1"), nil }
	p := dialing().WithLocalAddrs(own)
	for _, a := range []string{"93.184.216.34", "::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2606:2800:220:1::1"} {
		require.EqualError(t, p.CheckAddr(netip.MustParseAddr(a)), "egress denied: "+a+" is an address of this host")
	}
	require.NoError(t, p.CheckAddr(netip.MustParseAddr("93.184.216.35")))
	require.NoError(t, p.WithAllowCIDRs(netip.MustParsePrefix("93.184.216.34/32")).CheckAddr(netip.MustParseAddr("93.184.216.34")))

	// A list of the host's addresses may write them IPv4-mapped or with a
	// zone (a WithLocalAddrs of the embedder's own): the same addresses.
	spelled := dialing().WithLocalAddrs(func() ([]netip.Addr, error) {
		return addrs("::ffff:93.184.216.34", "2606:2800:220:1::1%eth0"), nil
	})
	require.EqualError(t, spelled.CheckAddr(netip.MustParseAddr("93.184.216.34")), "egress denied: 93.184.216.34 is an address of this host")
	require.EqualError(t, spelled.CheckAddr(netip.MustParseAddr("2606:2800:220:1::1")), "egress denied: 2606:2800:220:1::1 is an address of this host")

	// A name that resolves to one is refused when it is dialed.
	res := fakeResolver{"self.test": addrs("93.184.216.34")}
	_, err := web.NewHTTPRequest(webnet.DialingThrough(p.WithResolver(res), noDial(t))).Execute(context.Background(), httpCall(t, map[string]any{"url": "http://self.test/"}))
	require.ErrorContains(t, err, "egress denied: self.test resolves to 93.184.216.34, an address of this host")

	broken := p.WithLocalAddrs(func() ([]netip.Addr, error) { return nil, errors.New("no netlink") })
	require.EqualError(t, broken.CheckAddr(netip.MustParseAddr("8.8.8.8")),
		"egress denied: 8.8.8.8 is not checkable against this host's addresses (no netlink)")
	require.EqualError(t, broken.CheckAddr(netip.MustParseAddr("10.0.0.1")), "egress denied: 10.0.0.1 is a private address")
}
