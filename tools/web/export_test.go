package web

import (
	"context"
	"net"
)

// WithDial replaces the dialer, for tests: dial receives the checked
// "ip:port" the real dialer would connect to.
func (e Egress) WithDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Egress {
	e.dial = dial
	return e
}
