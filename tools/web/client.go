package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Client returns an HTTP client that enforces the policy: scheme, port and
// host allow-lists before each request and each redirect (at most
// MaxRedirects), the address rules on every connection it dials, the
// response body cap (reading past it fails with ErrTooLarge) and the
// timeout. It uses no proxy. Each call builds its own transport and
// connection pool; keep the client for reuse.
//
// With a policy's transport (WithTransport) nothing is dialed here: each
// request, the first and every redirect, is checked with CheckURL and
// then handed to that transport; the cap and the timeout apply the same.
func Client(policy Egress) *http.Client {
	var base http.RoundTripper
	if policy.transport != nil {
		base = checkedTransport{policy: policy, base: policy.transport}
	} else {
		base = dialTransport(policy)
	}
	return &http.Client{
		Transport:     capTransport{base: base, max: policy.MaxResponseBytes()},
		CheckRedirect: policy.checkRedirect,
		Timeout:       policy.Timeout(),
	}
}

// dialTransport dials from this process, checking every address.
func dialTransport(policy Egress) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, past the address check
		DialContext:           policy.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// checkedTransport checks each request's URL before an embedder's
// transport sends it; with no dial of ours, this is where the check
// happens for the first request too (http.Client checks only redirects).
type checkedTransport struct {
	policy Egress
	base   http.RoundTripper
}

func (t checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.policy.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

func (e Egress) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("too many redirects (more than %d)", MaxRedirects)
	}
	return e.CheckURL(req.URL)
}

// dialContext resolves the host once, refuses it if any of its addresses is
// refused, and dials only the checked addresses, so the address connected
// to is the address checked.
func (e Egress) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", address)
	}
	if e.isTrusted(host, int(port)) {
		// The operator's own webhook destination: dialed as configured.
		dial := e.dial
		if dial == nil {
			dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
		}
		return dial(ctx, network, address)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := e.CheckAddr(ip); err != nil {
			return nil, err
		}
		addrs = []netip.Addr{ip}
	} else {
		addrs, err = e.resolve().LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
		for _, a := range addrs {
			if kind := e.denial(a); kind != "" {
				return nil, fmt.Errorf("%w: %s resolves to %s, %s", ErrDenied, host, a, kind)
			}
		}
	}
	dial := e.dial
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, Control: e.control}
		dial = d.DialContext
	}
	var errs []error
	for _, a := range addrs {
		conn, err := dial(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// control checks the address the socket is about to connect to once more,
// in case anything between dialContext and the socket resolved again.
func (e Egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrDenied, address)
	}
	return e.CheckAddr(ap.Addr())
}

// capTransport caps every response body.
type capTransport struct {
	base http.RoundTripper
	max  int64
}

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// cappedBody returns the first max bytes of a body, then ErrTooLarge if
// there is more; the transport has already undone any compression, so the
// cap is on what the reader gets.
type cappedBody struct {
	rc        io.ReadCloser
	left, max int64
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

func (b *cappedBody) Close() error { return b.rc.Close() }
