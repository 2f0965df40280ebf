package webnet

import (
	"syscall"

	"github.com/revenantrt/revenant/tools/web"
)

// Control is the check the real dialer runs on a socket's address just
// before it connects.
func Control(p web.Egress) func(network, address string, c syscall.RawConn) error { return control(p) }

// WithoutServer drops the DNS server's address from a lookup or dial error.
func WithoutServer(err error) error { return withoutServer(err) }
