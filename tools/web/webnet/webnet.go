package webnet

import (
	"net/http"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/tools/web"
)

// Dialing returns p with its requests sent from this process by Transport:
// the policy a host with sockets builds its web tools with.
func Dialing(p web.Egress) web.Egress { return p.WithDialing(Transport) }

// Transport returns a client that sends p's requests from this process,
// connecting only through p.DialContext, with no proxy (a proxy would dial
// for us, past the address check). It does one round trip. It checks no
// URL, caps no body and sets no timeout: web.Client does those around it,
// so use it through Dialing rather than on its own. Each call has its own
// connection pool.
func Transport(p web.Egress) httpmsg.Doer {
	return nethttp.Client(&http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}})
}
