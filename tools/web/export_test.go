package web

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// WithDial replaces the dialer, for tests: dial receives the checked
// "ip:port" the real dialer would connect to.
func (e Egress) WithDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Egress {
	e.dial = dial
	return e
}

// WithLocalAddrs replaces the list of this host's addresses, for tests.
func (e Egress) WithLocalAddrs(list func() ([]netip.Addr, error)) Egress {
	e.localAddrs = list
	return e
}

// Control is the check the real dialer runs on the socket's address just
// before it connects.
func (e Egress) Control(network, address string, c syscall.RawConn) error {
	return e.control(network, address, c)
}

// HostDenial is the own-address half of the address rules.
func (e Egress) HostDenial(addr netip.Addr) string { return e.hostDenial(addr) }

// WithClock returns a copy of w whose requests are stamped with now's
// times.
func (w *Webhook) WithClock(now func() time.Time) *Webhook {
	c := *w
	c.now = now
	return &c
}
