package redirecthost

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Host is one such server; the test's cleanup closes it.
type Host struct {
	*httptest.Server
	mu  sync.Mutex
	got []string
}

// New starts a Host on ip (a loopback address such as 127.0.0.2) that
// answers a path in to with a 302 to its value, and any other path with
// "reached <ip>".
func New(t testing.TB, ip string, to map[string]string) *Host {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err)
	h := &Host{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.got = append(h.got, r.URL.Path)
		h.mu.Unlock()
		if loc, ok := to[r.URL.Path]; ok {
			http.Redirect(w, r, loc, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "reached "+ip)
	}))
	_ = h.Server.Listener.Close()
	h.Server.Listener = ln
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// Paths is the ledger: every path asked for, in order.
func (h *Host) Paths() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// Port is the server's port.
func (h *Host) Port() int {
	return int(netip.MustParseAddrPort(h.Listener.Addr().String()).Port())
}
