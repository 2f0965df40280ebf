package webnet_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// TestTransportDialsThroughThePolicy: the policy's address rules apply
// when the client dials (Dialing), and a redirect comes back as it came
// (one round trip: http_request follows it, checking the next URL).
func TestTransportDialsThroughThePolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	send := func(p web.Egress) (*httpmsg.Response, error) {
		req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "http://svc.test:"+u.Port()+"/here", nil)
		require.NoError(t, err)
		return web.Client(webnet.Dialing(p)).Do(req)
	}
	p := web.NewEgress().WithPorts(port).WithResolver(resolver{"svc.test": netip.MustParseAddr("127.0.0.1")})
	_, err = send(p)
	require.ErrorIs(t, err, web.ErrDenied, "a name resolving to loopback is refused when dialed")
	require.ErrorContains(t, err, "svc.test resolves to 127.0.0.1, a loopback address")

	resp, err := send(p.WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32")))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/elsewhere", resp.Header.Get("Location"))
}

// resolver maps names to one address each, without DNS.
type resolver map[string]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
