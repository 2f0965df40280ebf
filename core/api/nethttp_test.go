package api_test

import (
	"net/http"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

// The tests drive the API through net/http (httptest servers and
// recorders), adapting its httpmsg handlers at that edge as a host does.

func asHTTP(h httpmsg.Handler) http.Handler { return nethttp.Handler(h) }

func serveRoute(d *api.Directory, w http.ResponseWriter, r *http.Request) {
	d.ServeRoute(nethttp.Writer(w), nethttp.Request(r))
}

func serveTree(h *api.TreeHandler, w http.ResponseWriter, r *http.Request, t api.Tree) {
	h.ServeTree(nethttp.Writer(w), nethttp.Request(r), t)
}
