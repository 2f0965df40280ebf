package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

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

// DialContext connects to address ("host:port") as the policy allows, for
// a client that dials from this process (WithDialing): it resolves the
// host once, refuses it if any of its addresses is refused, and dials only
// the checked addresses, so the address connected to is the address
// checked; the socket's address is checked once more just before connect.
// The policy's trusted destination (a webhook's configured host and port)
// is dialed as configured.
func (e Egress) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
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
