package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Client returns the policy's client: it checks each request's URL with
// CheckURL before sending it, sends it with the policy's transport
// (WithTransport) or its own dialing client (WithDialing, which checks
// every address it connects to), caps the response body (reading past
// MaxResponseBytes fails with ErrTooLarge) and bounds the exchange, body
// included, by Timeout. It does one round trip, as every httpmsg.Doer: the
// http_request tool follows redirects itself, each checked again. A
// policy with neither a transport nor dialing sends nothing: every request
// fails. Each call builds its own client (and with dialing, its own
// connection pool); keep it for reuse.
func Client(policy Egress) httpmsg.Doer {
	var send httpmsg.Doer
	switch {
	case policy.transport != nil:
		send = policy.transport
	case policy.dialing != nil:
		send = policy.dialing(policy)
	}
	return checkedClient{policy: policy, send: send}
}

// ErrNoClient is returned for every request of a policy that has no way to
// send one: neither WithTransport nor WithDialing was given it.
var ErrNoClient = errors.New("no HTTP client: the egress policy neither dials (WithDialing, tools/web/webnet) nor has a platform transport (WithTransport)")

// checkedClient is Client's Doer.
type checkedClient struct {
	policy Egress
	send   httpmsg.Doer
}

func (c checkedClient) Do(req *httpmsg.Request) (*httpmsg.Response, error) {
	fail := func(err error) (*httpmsg.Response, error) {
		if req.Body != nil {
			_ = req.Body.Close() // a Doer closes the body, even on error
		}
		return nil, err
	}
	if req.URL == nil {
		return fail(errors.New("send request: no URL"))
	}
	if err := c.policy.CheckURL(req.URL); err != nil {
		return fail(err)
	}
	if c.send == nil {
		return fail(ErrNoClient)
	}
	ctx, cancel := context.WithTimeout(req.Context(), c.policy.Timeout())
	resp, err := c.send.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	max := c.policy.MaxResponseBytes()
	body := resp.Body
	if body == nil {
		body = httpmsg.NoBody
	}
	resp.Body = &cappedBody{rc: body, left: max, max: max, done: cancel}
	resp.Request = req
	return resp, nil
}

// DialTargets is the policy's decision on a connection to address
// ("host:port", as an HTTP client dials it) from this process: the dialer
// of tools/web/webnet asks it before each connection and dials only what
// it returns. It lives here, over net/netip, so that the rules stay with
// the policy and this package needs no package net.
//
// An IP literal is checked. A name is resolved once, with the policy's
// resolver (WithResolver) or else with fallback, and refused if any of its
// addresses is refused; the checked addresses are returned in the
// resolver's order, so the address connected to is the address checked,
// with no second lookup for DNS to change the answer in. The dialer checks
// each socket's address once more (CheckAddr) just before connect.
//
// The policy's trusted destination (a webhook's configured host and port)
// returns trusted and no addresses: the dialer connects to address as
// configured, checking only that its socket is not this server's own
// listener (CheckOwnListener). Errors wrap ErrDenied for a refusal.
func (e Egress) DialTargets(ctx context.Context, address string, fallback Resolver) (addrs []netip.AddrPort, trusted bool, err error) {
	host, port, err := splitHostPort(address)
	if err != nil {
		return nil, false, err
	}
	if e.isTrusted(host, int(port)) {
		return nil, true, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ap := netip.AddrPortFrom(ip, port)
		if err := e.CheckAddrPort(ap); err != nil {
			return nil, false, err
		}
		return []netip.AddrPort{ap}, false, nil
	}
	r := e.resolver
	if r == nil {
		r = fallback
	}
	if r == nil {
		return nil, false, fmt.Errorf("resolve %s: no resolver", host)
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, false, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, false, fmt.Errorf("resolve %s: no addresses", host)
	}
	for _, a := range ips {
		if kind := e.denial(a); kind != "" {
			return nil, false, fmt.Errorf("%w: %s resolves to %s, %s", ErrDenied, host, a, kind)
		}
		if e.ownListener(netip.AddrPortFrom(a, port)) {
			return nil, false, fmt.Errorf("%w: %s resolves to %s, and port %d there is this server's own API (its listen address)", ErrDenied, host, a, port)
		}
		addrs = append(addrs, netip.AddrPortFrom(a, port))
	}
	return addrs, false, nil
}

// splitHostPort splits "host:port" or "[host]:port" as net.SplitHostPort
// does, without package net: a host with a colon (IPv6) must be in
// brackets.
func splitHostPort(address string) (string, uint16, error) {
	var host, portText string
	if rest, ok := strings.CutPrefix(address, "["); ok {
		h, p, ok := strings.Cut(rest, "]")
		if !ok {
			return "", 0, fmt.Errorf("split %q: missing ']'", address)
		}
		if portText, ok = strings.CutPrefix(p, ":"); !ok {
			return "", 0, fmt.Errorf("split %q: missing port", address)
		}
		host = h
	} else {
		i := strings.LastIndexByte(address, ':')
		if i < 0 {
			return "", 0, fmt.Errorf("split %q: missing port", address)
		}
		host, portText = address[:i], address[i+1:]
		if strings.ContainsRune(host, ':') {
			return "", 0, fmt.Errorf("split %q: too many colons", address)
		}
	}
	if strings.ContainsAny(host, "[]") {
		return "", 0, fmt.Errorf("split %q: unexpected bracket", address)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port in %q", address)
	}
	return host, uint16(port), nil
}

// cappedBody returns the first max bytes of a body, then ErrTooLarge if
// there is more; the transport has already undone any compression, so the
// cap is on what the reader gets. Close also releases the client's timeout.
type cappedBody struct {
	rc        io.ReadCloser
	left, max int64
	done      context.CancelFunc
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: the body is larger than %d bytes", ErrTooLarge, b.max)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error {
	err := b.rc.Close()
	b.done()
	return err
}
