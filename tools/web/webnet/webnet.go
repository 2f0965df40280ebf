package webnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/tools/web"
)

// dialTimeout bounds the connect of one address.
const dialTimeout = 10 * time.Second

// DialFunc connects to an address, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Dialing returns p with its requests sent from this process by Transport,
// and with this host's interface addresses as the addresses the policy
// refuses as its own (web.Egress.WithLocalAddrs), unless p already has a
// list: the policy a host with sockets builds its web tools with. Names
// resolve with net.DefaultResolver unless p has a resolver; either way a
// lookup's error does not name the DNS server asked (Quiet).
func Dialing(p web.Egress) web.Egress { return dialing(p, nil) }

// DialingThrough is Dialing with dial connecting in place of the real
// dialer, for tests: dial receives each checked "ip:port" the real dialer
// would connect to (or a trusted destination's address as configured),
// and the socket check before connect is dial's business.
func DialingThrough(p web.Egress, dial DialFunc) web.Egress { return dialing(p, dial) }

func dialing(p web.Egress, hook DialFunc) web.Egress {
	if p.LocalAddrs() == nil {
		p = p.WithLocalAddrs(InterfaceAddrs)
	}
	r := p.Resolver()
	if r == nil {
		r = net.DefaultResolver
	}
	p = p.WithResolver(Quiet(r))
	return p.WithDialing(func(q web.Egress) httpmsg.Doer { return transport(dialContext(q, hook)) })
}

// Transport returns a client that sends p's requests from this process,
// connecting only through DialContext(p), with no proxy (a proxy would
// dial for us, past the address check). It does one round trip. It checks
// no URL, caps no body and sets no timeout: web.Client does those around
// it, so use it through Dialing rather than on its own. Each call has its
// own connection pool.
func Transport(p web.Egress) httpmsg.Doer { return transport(DialContext(p)) }

func transport(dial DialFunc) httpmsg.Doer {
	return nethttp.Client(&http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}})
}

// DialContext returns the dialer of p's connections: it dials only what
// p.DialTargets allows (each address a name resolves to checked, with
// net.DefaultResolver unless p has its own), the checked addresses in
// turn until one connects, and checks the socket's address once more in
// the dialer's Control hook just before connect, in case anything between
// the check and the socket resolved again. The policy's trusted
// destination (a webhook's configured host and port) is dialed as
// configured, its socket refused only at this server's own listener.
func DialContext(p web.Egress) DialFunc { return dialContext(p, nil) }

func dialContext(p web.Egress, hook DialFunc) DialFunc {
	checked, plain := hook, hook
	if hook == nil {
		checked = (&net.Dialer{Timeout: dialTimeout, Control: control(p)}).DialContext
		plain = (&net.Dialer{Timeout: dialTimeout, Control: ownListenerControl(p)}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		addrs, trusted, err := p.DialTargets(ctx, address, Quiet(net.DefaultResolver))
		if err != nil {
			return nil, err
		}
		if trusted {
			// The operator's own webhook destination: dialed as configured
			// (the dialer resolves a name itself), refused only where it
			// is this server's own API.
			conn, err := plain(ctx, network, address)
			return conn, withoutServer(err)
		}
		var errs []error
		for _, a := range addrs {
			conn, err := checked(ctx, network, a.String())
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
}

// control checks the address a socket is about to connect to.
func control(p web.Egress) func(network, address string, c syscall.RawConn) error {
	return socketCheck(p.CheckAddrPort)
}

// ownListenerControl refuses a socket about to connect to this server's
// own listener (web.Egress.CheckOwnListener), the one check a trusted
// destination gets.
func ownListenerControl(p web.Egress) func(network, address string, c syscall.RawConn) error {
	return socketCheck(p.CheckOwnListener)
}

// socketCheck is a dialer's Control hook that runs check on the address
// a socket is about to connect to; one it cannot read is refused.
func socketCheck(check func(netip.AddrPort) error) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot check address %q", web.ErrDenied, address)
		}
		return check(ap)
	}
}

// InterfaceAddrs lists this host's addresses from its network interfaces,
// for web.Egress.WithLocalAddrs. Dialing uses it, read afresh at every
// check so an address gained since start-up (DHCP, a VPN) is refused too;
// the policy only asks for an address that is otherwise public, so a
// denied private address costs no system call.
func InterfaceAddrs() ([]netip.Addr, error) {
	list, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// Quiet returns r with the DNS server's address dropped from its errors:
// "lookup a.example on 10.0.0.53:53: no such host" reads "lookup
// a.example: no such host". The error reaches the model, which has no
// business knowing the host's internal resolver.
func Quiet(r web.Resolver) web.Resolver { return quietResolver{r} }

type quietResolver struct{ r web.Resolver }

func (q quietResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := q.r.LookupNetIP(ctx, network, host)
	return addrs, withoutServer(err)
}

// withoutServer is err without the DNS server's address, for a
// *net.DNSError alone or under a dial's *net.OpError (copies: a lookup's
// error may be shared by the callers it answered).
func withoutServer(err error) error {
	switch e := err.(type) {
	case *net.DNSError:
		if e.Server != "" {
			c := *e
			c.Server = ""
			return &c
		}
	case *net.OpError:
		if inner := withoutServer(e.Err); inner != e.Err {
			c := *e
			c.Err = inner
			return &c
		}
	}
	return err
}
