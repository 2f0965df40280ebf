package web

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/tools/web/httpargs"
)

// Defaults of an Egress policy.
const (
	// DefaultMaxResponseBytes caps a response body: 1 MiB.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultTimeout bounds a whole request, body included: 30 s.
	DefaultTimeout = 30 * time.Second
	// MaxRedirects is how many redirects a request follows; the next one is
	// an error.
	MaxRedirects = 5
)

// ErrDenied is wrapped by every refusal of the egress policy.
var ErrDenied = errors.New("egress denied")

// ErrNotPermitted is wrapped by the error of a redirect the session's
// permission rules do not allow outright (tool.Call.Permit).
var ErrNotPermitted = errors.New("redirect not permitted")

// ErrTooLarge is returned while reading a response body past the policy's
// MaxResponseBytes.
var ErrTooLarge = errors.New("response too large")

// Resolver looks up a host name's addresses. *net.Resolver implements it
// (tools/web/webnet dials with net.DefaultResolver unless the policy has
// its own); tests use a fake one to map a name to any address without
// real DNS. It speaks net/netip so that this package needs no package net.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Egress is the policy for outbound HTTP. It is immutable: derive one with
// the With methods from NewEgress (the zero Egress is the same policy).
// Entries that can never match (a port of 0, a scheme other than http or
// https, a malformed host pattern) are kept but never allow anything, so a
// mistake fails closed; package config rejects them with the key's name.
type Egress struct {
	schemes  []string
	ports    []int
	hosts    []string
	allow    []netip.Prefix
	maxBytes int64
	timeout  time.Duration
	resolver Resolver
	// transport, when set, sends every request: the platform's fetch
	// resolves and connects (WithTransport).
	transport httpmsg.Doer
	// dialing, when set, builds the client that sends a tool's requests
	// from this process, dialing only what the tool's policy's
	// DialTargets allows (WithDialing; tools/web/webnet). Neither set: nothing
	// can be sent (Client fails every request).
	dialing func(Egress) httpmsg.Doer
	// localAddrs lists this host's addresses (WithLocalAddrs); nil: none
	// are known, and no address is refused for being this host's.
	localAddrs func() ([]netip.Addr, error)
	// listener gives the address this process serves its API on
	// (WithOwnListener); nil, or an invalid address: none.
	listener func() netip.AddrPort
	// trusted is the one destination (host and port) an operator configured
	// for a webhook: its client may reach it whatever the policy says.
	// http_request never has one: model-supplied URLs are never trusted.
	trusted *destination
}

// NewEgress returns the default policy: schemes https and http, ports 443
// and 80, any public host, no private ranges, 1 MiB bodies, 30 s.
func NewEgress() Egress { return Egress{} }

// WithSchemes sets the allowed URL schemes (compared without case).
// Default https and http; with no arguments the default is restored.
func (e Egress) WithSchemes(schemes ...string) Egress {
	e.schemes = nil
	for _, s := range schemes {
		e.schemes = append(e.schemes, strings.ToLower(s))
	}
	return e
}

// WithPorts sets the allowed ports. A URL without a port uses its scheme's
// (443 for https, 80 for http). Default 443 and 80 only, so a model cannot
// reach a database or admin port on a public host; with no arguments the
// default is restored.
func (e Egress) WithPorts(ports ...int) Egress {
	e.ports = slices.Clone(ports)
	return e
}

// WithHosts restricts requests to these hosts: exact names ("api.example.com",
// or an IP literal) or suffix patterns ("*.example.com", which matches every
// subdomain of example.com but not example.com itself). Matching ignores
// case and a trailing dot. Default, and with no arguments: any host, as long
// as its addresses are public. The host list does not override the address
// rules: an allowed name that resolves to a private address is still refused
// unless WithAllowCIDRs allows that address.
func (e Egress) WithHosts(hosts ...string) Egress {
	e.hosts = nil
	for _, h := range hosts {
		e.hosts = append(e.hosts, httpargs.NormalizeHost(h))
	}
	return e
}

// WithAllowCIDRs allows addresses in these ranges even though they are
// loopback, private, link-local, another special-purpose block or this
// host's own. Default none.
func (e Egress) WithAllowCIDRs(prefixes ...netip.Prefix) Egress {
	e.allow = nil
	for _, p := range prefixes {
		e.allow = append(e.allow, p.Masked())
	}
	return e
}

// WithMaxResponseBytes caps response bodies at n bytes. Default 1 MiB; n ≤ 0
// restores it. A Client's body read fails with ErrTooLarge past the cap; the
// tools show a truncation marker, then the first n bytes.
func (e Egress) WithMaxResponseBytes(n int64) Egress {
	e.maxBytes = n
	return e
}

// WithTimeout bounds each request, from dial to the end of the body.
// Default 30 s; d ≤ 0 restores it.
func (e Egress) WithTimeout(d time.Duration) Egress {
	e.timeout = d
	return e
}

// WithResolver resolves host names with r instead of the dialer's default
// (net.DefaultResolver, in tools/web/webnet). Every address r returns is
// checked before it is dialed.
func (e Egress) WithResolver(r Resolver) Egress {
	e.resolver = r
	return e
}

// Resolver is the resolver set with WithResolver, or nil.
func (e Egress) Resolver() Resolver { return e.resolver }

// WithLocalAddrs sets how this host's own addresses are listed: the
// address rules refuse each of them, because a service bound to 0.0.0.0
// answers on a public address of the host too. list runs at each check of
// an otherwise public address, so an address gained since start-up (DHCP,
// a VPN) is refused as well; when it fails, every public address is
// refused, since none can be told apart from the host's own.
// tools/web/webnet.Dialing sets it from the host's interfaces. Unset (nil),
// no address is refused as the host's own: right where this process sends
// nothing itself (the wasm guest) or where the platform's fetch sends from
// elsewhere (WithTransport in a Durable Object).
func (e Egress) WithLocalAddrs(list func() ([]netip.Addr, error)) Egress {
	e.localAddrs = list
	return e
}

// LocalAddrs is the list set with WithLocalAddrs, or nil.
func (e Egress) LocalAddrs() func() ([]netip.Addr, error) { return e.localAddrs }

// WithOwnListener names the address this process serves its own API on:
// a connection to it at its port is refused even where WithAllowCIDRs
// allows the address. An operator who lets a model reach loopback
// (allow_cidrs 127.0.0.1/32) does not mean it to call revenant's API,
// which, on a server without tokens, would obey it: create sessions,
// answer permission requests, delete trees. An unspecified address
// (0.0.0.0, ::) stands for every address that reaches such a listener:
// loopback, unspecified and this host's own (WithLocalAddrs). Only a
// dialer that sees ports checks it (DialTargets, CheckAddrPort).
// listen is asked at each check: a server builds its tools before it
// listens (a bad configuration stops it before it takes a port), and its
// port may be chosen by the system (":0").
func (e Egress) WithOwnListener(listen func() netip.AddrPort) Egress {
	e.listener = listen
	return e
}

// CheckAddrPort is CheckAddr, and refuses the process's own listener
// (WithOwnListener) at its port as well.
func (e Egress) CheckAddrPort(ap netip.AddrPort) error {
	if err := e.CheckAddr(ap.Addr()); err != nil {
		return err
	}
	return e.CheckOwnListener(ap)
}

// CheckOwnListener refuses only the process's own listener
// (WithOwnListener) at its port: the check a trusted destination (a
// webhook the operator configured) still gets, since the operator's
// webhook is its URL's business but revenant's own API never is; a
// webhook pointed at it would let a model drive the server through its
// arguments.
func (e Egress) CheckOwnListener(ap netip.AddrPort) error {
	if e.ownListener(ap) {
		return fmt.Errorf("%w: %s is this server's own API (its listen address)", ErrDenied, ap)
	}
	return nil
}

// ownListener reports whether a connection to ap reaches the listener
// set with WithOwnListener. Connecting to an unspecified address reaches
// a local listener (Linux, BSD), so that always counts; a host whose own
// addresses cannot be listed counts every address, failing closed.
func (e Egress) ownListener(ap netip.AddrPort) bool {
	if e.listener == nil {
		return false
	}
	listen := e.listener()
	if !listen.IsValid() || ap.Port() != listen.Port() {
		return false
	}
	l := listen.Addr().WithZone("").Unmap()
	for _, a := range addrForms(ap.Addr()) {
		a = a.Unmap()
		switch {
		case a.IsUnspecified(), a == l:
			return true
		case l.IsUnspecified() && a.IsLoopback():
			return true
		case l.IsUnspecified() && e.localAddrs != nil:
			own, err := e.localAddrs()
			if err != nil || slices.ContainsFunc(own, func(o netip.Addr) bool { return o.WithZone("").Unmap() == a }) {
				return true
			}
		}
	}
	return false
}

// WithTransport sends requests through d instead of dialing from this
// process, for a platform whose own HTTP client resolves names and
// connects (a Durable Object's fetch, where Go cannot resolve DNS or open
// sockets). Every check that does not need a resolved address still runs,
// in Client, before d sees a request: CheckURL on the first request and on
// each redirect the http_request tool follows (schemes, ports, host
// allow-list, an IP literal's address), plus the name rules below; the
// response cap and the timeout; http_request's Idempotency-Key and a
// webhook's signed headers. A refused request never reaches d.
//
// What cannot run: the addresses a name resolves to are the platform's
// business, so they are not checked. With a transport a host name is
// allowed unless it is one that names this machine or is read as an
// address anyway: "localhost" and every name under ".localhost" (RFC 6761:
// loopback by definition) stand for 127.0.0.1 and ::1 and pass only if
// WithAllowCIDRs allows both; a host that ends in a number ("0x7f.1",
// "2130706433", "127.1") but is not a standard IP literal is refused,
// because a WHATWG URL parser, as fetch uses, reads it as an IPv4 address;
// and, as on every transport (CheckURL), so is a name with anything but
// ASCII letters, digits, '-', '_' and '.', which fetch would map (IDNA) or
// unescape into a name not checked here.
// On Cloudflare this leaves the platform's own guard: a Worker's fetch
// goes out to the public Internet and cannot reach the account's private
// networks without a binding. Under local workerd (wrangler dev) fetch
// connects from the development machine, so a public name that resolves
// to a private or loopback address does reach it there: restrict the
// names with WithHosts where that matters.
//
// d does one round trip (an httpmsg.Doer never follows redirects: the
// http_request tool does, checking each), uses no proxy and honours the
// request's context. It replaces WithDialing's client; nil sends nothing.
func (e Egress) WithTransport(d httpmsg.Doer) Egress {
	e.transport, e.dialing = d, nil
	return e
}

// Transport is the transport set with WithTransport, or nil.
func (e Egress) Transport() httpmsg.Doer { return e.transport }

// WithDialing sends requests from this process: client(p) builds the
// client of each tool, p being that tool's own policy (a webhook's trusts
// its configured destination), and must connect only to what
// p.DialTargets allows, checking each socket's address with CheckAddr
// before connect, with no proxy and no redirects followed.
// tools/web/webnet.Dialing is the one for hosts with sockets and net/http;
// it also sets the host's own addresses (WithLocalAddrs) and resolves
// with net.DefaultResolver unless the policy has a resolver. This package links no HTTP client and no package net itself,
// so that a binary that sends nothing (the wasm guest) carries neither. It
// replaces WithTransport's.
func (e Egress) WithDialing(client func(p Egress) httpmsg.Doer) Egress {
	e.dialing, e.transport = client, nil
	return e
}

// Schemes are the allowed schemes.
func (e Egress) Schemes() []string {
	if len(e.schemes) == 0 {
		return []string{"https", "http"}
	}
	return slices.Clone(e.schemes)
}

// Ports are the allowed ports.
func (e Egress) Ports() []int {
	if len(e.ports) == 0 {
		return []int{443, 80}
	}
	return slices.Clone(e.ports)
}

// Hosts are the allowed host patterns; empty means any public host.
func (e Egress) Hosts() []string { return slices.Clone(e.hosts) }

// AllowCIDRs are the ranges allowed despite the address rules.
func (e Egress) AllowCIDRs() []netip.Prefix { return slices.Clone(e.allow) }

// MaxResponseBytes is the response body cap.
func (e Egress) MaxResponseBytes() int64 {
	if e.maxBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return e.maxBytes
}

// Timeout bounds one request.
func (e Egress) Timeout() time.Duration {
	if e.timeout <= 0 {
		return DefaultTimeout
	}
	return e.timeout
}

// String describes the policy, for a start-up log line.
func (e Egress) String() string {
	hosts := "any public host"
	if len(e.hosts) > 0 {
		hosts = strings.Join(e.hosts, ", ")
	}
	cidrs := "none"
	if len(e.allow) > 0 {
		s := make([]string, len(e.allow))
		for i, p := range e.allow {
			s[i] = p.String()
		}
		cidrs = strings.Join(s, ", ")
	}
	return fmt.Sprintf("schemes %s; ports %s; hosts %s; private ranges allowed: %s; max response %d bytes; timeout %s",
		strings.Join(e.Schemes(), ", "), joinInts(e.Ports()), hosts, cidrs, e.MaxResponseBytes(), e.Timeout())
}

// destination is a host and port.
type destination struct {
	host string
	port int
}

// trusting returns the policy with u's host and port as a trusted
// destination: an operator-configured webhook URL, reachable by that
// webhook's client even on a private address, without widening what any
// other client (http_request) may reach.
func (e Egress) trusting(u *url.URL) (Egress, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return e, fmt.Errorf("%w: scheme %q is not http or https", ErrDenied, u.Scheme)
	}
	port, err := urlPort(u, scheme)
	if err != nil {
		return e, fmt.Errorf("%w: %v", ErrDenied, err)
	}
	host := httpargs.NormalizeHost(u.Hostname())
	if _, err := netip.ParseAddr(host); err != nil {
		// Dialed by its mapping (IDNA) on every transport, a name not in
		// ASCII would never match the destination trusted as written.
		if err := checkASCIIName(host); err != nil {
			return e, err
		}
	}
	e.trusted = &destination{host: host, port: port}
	return e, nil
}

// isTrusted reports whether host:port is the policy's trusted destination.
func (e Egress) isTrusted(host string, port int) bool {
	return e.trusted != nil && e.trusted.host == httpargs.NormalizeHost(host) && e.trusted.port == port
}

// CheckURL reports whether u may be requested: its scheme, port and host
// must be allowed and, when the host is an IP literal, so must the address;
// a host name must be ASCII (checkASCIIName).
// A host name's addresses are checked when it is dialed. The policy's
// trusted destination, if any, is allowed as it is. The error wraps
// ErrDenied.
func (e Egress) CheckURL(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	host := httpargs.NormalizeHost(u.Hostname())
	if port, err := urlPort(u, scheme); err == nil && (scheme == "https" || scheme == "http") && e.isTrusted(host, port) {
		return nil
	}
	if !slices.Contains(e.Schemes(), scheme) {
		return fmt.Errorf("%w: scheme %q is not allowed (allowed: %s)", ErrDenied, u.Scheme, strings.Join(e.Schemes(), ", "))
	}
	if host == "" {
		return fmt.Errorf("%w: the URL has no host", ErrDenied)
	}
	port, err := urlPort(u, scheme)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDenied, err)
	}
	if !slices.Contains(e.Ports(), port) {
		return fmt.Errorf("%w: port %d is not allowed (allowed: %s)", ErrDenied, port, joinInts(e.Ports()))
	}
	if len(e.hosts) > 0 && !e.hostAllowed(host) {
		return fmt.Errorf("%w: host %s is not on the host allow-list", ErrDenied, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return e.CheckAddr(ip)
	}
	if err := checkASCIIName(host); err != nil {
		return err
	}
	if e.transport != nil {
		return e.checkUnresolvedName(host)
	}
	return nil
}

// checkASCIIName refuses a host name (not an IP literal) with anything but
// ASCII letters, digits, '-', '_' and '.', on every transport. A client
// maps such a name before it resolves it (IDNA: net/http dials
// "ｌｏｃａｌｈｏｓｔ" as localhost, fetch does the same, and unescapes %XX),
// while the call's permission resource ("http:" and the host as written)
// keeps the spelling, so a rule that denies or asks for a host would not
// match a request that reaches it. Punycode (xn--) names pass.
func checkASCIIName(host string) error {
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("%w: host %q is not an ASCII name (write an internationalized name in its xn-- form)", ErrDenied, host)
		}
	}
	return nil
}

// checkUnresolvedName applies the name rules of WithTransport to host, a
// normalized name that is not a standard IP literal: the platform resolves
// it, so only what the name itself says can be checked.
func (e Egress) checkUnresolvedName(host string) error {
	// An ASCII name (checkASCIIName): fetch maps Unicode (IDNA) and
	// unescapes %XX in a host, so "１２７.０.０.１" or "ｌｏｃａｌｈｏｓｔ" would
	// name what the rules here cannot see.
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		for _, a := range tables().loopbackNames {
			if e.denial(a) != "" {
				return fmt.Errorf("%w: %s is a loopback name", ErrDenied, host)
			}
		}
		return nil
	}
	labels := strings.Split(host, ".")
	if last := labels[len(labels)-1]; numericLabel(last) {
		return fmt.Errorf("%w: host %s would be read as an IPv4 address in a non-standard form", ErrDenied, host)
	}
	return nil
}

// numericLabel reports whether a URL parser following the WHATWG URL
// standard reads a host ending in label as an IPv4 address: decimal
// digits, or "0x" and hex digits.
func numericLabel(label string) bool {
	digits := label
	hex := false
	if rest, ok := strings.CutPrefix(digits, "0x"); ok {
		digits, hex = rest, true
	} else if rest, ok := strings.CutPrefix(digits, "0X"); ok {
		digits, hex = rest, true
	}
	if digits == "" {
		return hex // "0x" alone is the number 0
	}
	for _, r := range digits {
		switch {
		case r >= '0' && r <= '9':
		case hex && (r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'):
		default:
			return false
		}
	}
	return true
}

// CheckAddr reports whether addr may be dialed: a globally reachable
// address that is not this host's own, or one in an allowed CIDR. The error wraps ErrDenied and names the kind of address,
// as in "egress denied: 127.0.0.1 is a loopback address".
func (e Egress) CheckAddr(addr netip.Addr) error {
	if kind := e.denial(addr); kind != "" {
		return fmt.Errorf("%w: %s is %s", ErrDenied, addr, kind)
	}
	return nil
}

// denial says why addr is refused ("a private address"), or "" if it is
// not: a special-purpose address (special.go) or one of this host's own,
// unless an allow rule names it.
func (e Egress) denial(addr netip.Addr) string {
	if e.allowed(addr) {
		return ""
	}
	if kind := classify(addr); kind != "" {
		return kind
	}
	return e.hostDenial(addr)
}

// hostDenial refuses this host's own addresses (WithLocalAddrs): a service
// bound to 0.0.0.0 answers on every one of them, public ones included.
// When the host's addresses cannot be listed, nothing public can be told
// apart from them, so the address is refused. A policy with no list
// refuses none.
func (e Egress) hostDenial(addr netip.Addr) string {
	if e.localAddrs == nil {
		return ""
	}
	own, err := e.localAddrs()
	if err != nil {
		return fmt.Sprintf("not checkable against this host's addresses (%v)", err)
	}
	for _, a := range addrForms(addr) {
		for _, o := range own {
			if a == o.WithZone("").Unmap() {
				return "an address of this host"
			}
		}
	}
	return ""
}

func (e Egress) allowed(addr netip.Addr) bool {
	for _, p := range e.allow {
		for _, a := range addrForms(addr) {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

func (e Egress) hostAllowed(host string) bool {
	for _, pattern := range e.hosts {
		if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) && len(host) > len(suffix)+1 {
				return true
			}
			continue
		}
		if host == pattern {
			return true
		}
	}
	return false
}

func urlPort(u *url.URL, scheme string) (int, error) {
	p := u.Port()
	if p == "" {
		switch scheme {
		case "https":
			return 443, nil
		case "http":
			return 80, nil
		}
		return 0, fmt.Errorf("no port for scheme %q", scheme)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q", p)
	}
	return n, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
