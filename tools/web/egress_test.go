package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// dialing is the default policy with requests dialed from this process, as
// a host with sockets builds it.
func dialing() web.Egress { return webnet.Dialing(web.NewEgress()) }

// dialingThrough is dialing with dial connecting in place of the real
// dialer: it receives the checked "ip:port" the real one would connect to.
func dialingThrough(dial webnet.DialFunc) web.Egress {
	return webnet.DialingThrough(web.NewEgress(), dial)
}

// get sends a GET for rawURL with c.
func get(t *testing.T, c httpmsg.Doer, rawURL string) (*httpmsg.Response, error) {
	t.Helper()
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, rawURL, nil)
	require.NoError(t, err)
	return c.Do(req)
}

// fakeResolver maps host names to addresses without DNS.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var loopback = netip.MustParsePrefix("127.0.0.1/32")

// testServer is an httptest server on 127.0.0.1 that counts its requests.
type testServer struct {
	*httptest.Server
	port int
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func newServer(t *testing.T, h http.HandlerFunc) *testServer {
	t.Helper()
	s := &testServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, string(b))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	s.port, err = strconv.Atoi(u.Port())
	require.NoError(t, err)
	return s
}

func (s *testServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func (s *testServer) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.body...)
}

// allowing is a policy that lets requests reach s: its port, and 127.0.0.1.
func (s *testServer) allowing() web.Egress {
	return dialing().WithPorts(80, 443, s.port).WithAllowCIDRs(loopback)
}

// noDial fails the test if anything is dialed.
func noDial(t *testing.T) func(context.Context, string, string) (net.Conn, error) {
	return func(_ context.Context, _, addr string) (net.Conn, error) {
		t.Errorf("dialed %s", addr)
		return nil, errors.New("test: no dialing")
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct{ addr, kind string }{
		{"127.0.0.1", "a loopback address"},
		{"127.1.2.3", "a loopback address"},
		{"::1", "a loopback address"},
		{"10.0.0.1", "a private address"},
		{"172.16.0.1", "a private address"},
		{"172.31.255.255", "a private address"},
		{"192.168.1.1", "a private address"},
		{"fc00::1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"169.254.169.254", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"fe80::1%eth0", "a link-local address"},
		{"febf:ffff::1", "a link-local address"}, // the last /16 of fe80::/10
		{"fec0::1", "a private address"},         // site-local, fec0::/10
		{"feff:ffff::1", "a private address"},
		{"0.0.0.0", "an unspecified address"},
		{"::", "an unspecified address"},
		{"224.0.0.1", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"100.64.0.1", "a carrier-grade NAT address"},
		{"255.255.255.255", "a reserved address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::ffff:10.0.0.1", "a private address"},
		{"::ffff:169.254.169.254", "a link-local address"},
		{"::127.0.0.1", "a loopback address (127.0.0.1 in IPv4-compatible form)"},
		{"64:ff9b::a00:1", "a private address (10.0.0.1 in NAT64 form)"},
		{"2002:a9fe:a9fe::1", "a link-local address (169.254.169.254 in 6to4 form)"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			addr := netip.MustParseAddr(tc.addr)
			err := dialing().CheckAddr(addr)
			require.ErrorIs(t, err, web.ErrDenied)
			require.EqualError(t, err, fmt.Sprintf("egress denied: %s is %s", addr, tc.kind))
		})
	}
	for _, public := range []string{"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		require.NoError(t, dialing().CheckAddr(netip.MustParseAddr(public)), public)
	}
}

func TestAllowCIDRs(t *testing.T) {
	p := dialing().WithAllowCIDRs(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"))
	for _, ok := range []string{"10.0.0.1", "10.255.0.9", "127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a00:1"} {
		require.NoError(t, p.CheckAddr(netip.MustParseAddr(ok)), ok)
	}
	for _, denied := range []string{"127.0.0.2", "192.168.0.1", "169.254.169.254", "::1"} {
		require.ErrorIs(t, p.CheckAddr(netip.MustParseAddr(denied)), web.ErrDenied, denied)
	}
}

func TestCheckURL(t *testing.T) {
	check := func(p web.Egress, raw string) error {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		return p.CheckURL(u)
	}
	def := dialing()
	require.NoError(t, check(def, "https://example.com/x"))
	require.NoError(t, check(def, "http://example.com:80/x"))
	require.NoError(t, check(def, "http://example.com:443/x"))
	require.EqualError(t, check(def, "ftp://example.com/x"), `egress denied: scheme "ftp" is not allowed (allowed: https, http)`)
	require.EqualError(t, check(def, "https://example.com:8443/"), "egress denied: port 8443 is not allowed (allowed: 443, 80)")
	require.EqualError(t, check(def, "http://127.0.0.1/"), "egress denied: 127.0.0.1 is a loopback address")
	require.EqualError(t, check(def, "http://[::1]:80/"), "egress denied: ::1 is a loopback address")
	// A URL with no host (a Location "http:///x") names nothing to check.
	require.EqualError(t, check(def, "http:///x"), "egress denied: the URL has no host")
	// Port 0 is no port: a policy that lists it (a mistake) still refuses it.
	require.EqualError(t, check(def.WithPorts(0, 80), "http://example.com:0/"), `egress denied: bad port "0"`)

	https := def.WithSchemes("HTTPS")
	require.NoError(t, check(https, "https://example.com/"))
	require.EqualError(t, check(https, "http://example.com/"), `egress denied: scheme "http" is not allowed (allowed: https)`)

	hosts := def.WithHosts("api.example.com", "*.Example.org")
	require.NoError(t, check(hosts, "https://API.example.com./v1"))
	require.NoError(t, check(hosts, "https://a.b.example.org/"))
	require.EqualError(t, check(hosts, "https://example.org/"), "egress denied: host example.org is not on the host allow-list")
	require.EqualError(t, check(hosts, "https://evilexample.org/"), "egress denied: host evilexample.org is not on the host allow-list")
	require.EqualError(t, check(hosts, "https://example.com/"), "egress denied: host example.com is not on the host allow-list")
}

func TestEgressDefaults(t *testing.T) {
	p := dialing()
	require.Equal(t, []string{"https", "http"}, p.Schemes())
	require.Equal(t, []int{443, 80}, p.Ports())
	require.Empty(t, p.Hosts())
	require.Empty(t, p.AllowCIDRs())
	require.Equal(t, int64(1<<20), p.MaxResponseBytes())
	require.Equal(t, 30*time.Second, p.Timeout())
	require.Equal(t, "schemes https, http; ports 443, 80; hosts any public host; private ranges allowed: none; max response 1048576 bytes; timeout 30s", p.String())

	// With methods copy: changing the caller's slice changes nothing.
	ports := []int{8080}
	q := p.WithPorts(ports...)
	ports[0] = 22
	require.Equal(t, []int{8080}, q.Ports())
	require.Equal(t, []int{443, 80}, p.Ports(), "the original is unchanged")
	require.Equal(t, []string{"https", "http"}, q.WithSchemes("http").WithSchemes().Schemes(), "no arguments restore the default")

	// An allowed range is kept as the block it names, as the start-up log
	// line shows it: host bits written by mistake are dropped.
	r := p.WithAllowCIDRs(netip.MustParsePrefix("10.1.2.3/8"))
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, r.AllowCIDRs())
	require.Contains(t, r.String(), "private ranges allowed: 10.0.0.0/8;")
}

// TestDialTargets: the dialer's decision, asked before each connection:
// an IP literal is checked itself (the dialer may be handed one no URL
// check saw), a name whose lookup finds no address is an error rather than
// nothing to dial, and the trusted destination is dialed as configured.
func TestDialTargets(t *testing.T) {
	ctx := context.Background()
	res := fakeResolver{"empty.test": addrs(), "pub.test": addrs("93.184.216.34", "2606:2800:220:1::1")}
	p := web.NewEgress().WithResolver(res)

	_, _, err := p.DialTargets(ctx, "10.0.0.1:80", nil)
	require.EqualError(t, err, "egress denied: 10.0.0.1 is a private address")
	_, _, err = p.DialTargets(ctx, "[::1]:443", nil)
	require.ErrorIs(t, err, web.ErrDenied)

	got, trusted, err := p.DialTargets(ctx, "93.184.216.34:443", nil)
	require.NoError(t, err)
	require.False(t, trusted)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("93.184.216.34:443")}, got)

	_, _, err = p.DialTargets(ctx, "empty.test:80", nil)
	require.EqualError(t, err, "resolve empty.test: no addresses")

	got, _, err = p.DialTargets(ctx, "pub.test:80", nil)
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("93.184.216.34:80"), netip.MustParseAddrPort("[2606:2800:220:1::1]:80")}, got, "in the resolver's order")
}

// TestClientClosesRefusedRequestBody: a Doer closes the request's body even
// when it refuses to send it, so a caller's body (a file, a pipe) is never
// left open by a refusal.
func TestClientClosesRefusedRequestBody(t *testing.T) {
	for _, tc := range []struct {
		p    web.Egress
		url  string
		want error
	}{
		{dialing(), "http://127.0.0.1/", web.ErrDenied},
		{web.NewEgress(), "https://example.com/", web.ErrNoClient},
	} {
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodPost, tc.url, body)
		require.NoError(t, err)
		_, err = web.Client(tc.p).Do(req)
		require.ErrorIs(t, err, tc.want)
		require.True(t, body.closed(), "the body of a request not sent is closed (%v)", tc.want)
	}
}

// closeTracker is a body that records whether it was closed.
type closeTracker struct {
	io.Reader
	mu   sync.Mutex
	done bool
}

func (c *closeTracker) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return nil
}

func (c *closeTracker) closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// TestDialChecksEveryResolvedAddress: a name with one private address among
// public ones is refused, and what is dialed is the checked address itself.
func TestDialChecksEveryResolvedAddress(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	var mu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	res := fakeResolver{
		"mixed.test": addrs("93.184.216.34", "10.0.0.5"),
		"lan.test":   addrs("10.1.2.3"),
	}
	p := dialingThrough(dial).WithResolver(res)

	_, err := get(t, web.Client(p), "http://mixed.test/")
	require.ErrorIs(t, err, web.ErrDenied)
	require.ErrorContains(t, err, "egress denied: mixed.test resolves to 10.0.0.5, a private address")
	require.Empty(t, dialed)

	resp, err := get(t, web.Client(p.WithAllowCIDRs(netip.MustParsePrefix("10.0.0.0/8"))), "http://lan.test/")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "ok", string(b))
	require.Equal(t, []string{"10.1.2.3:80"}, dialed, "the checked address is dialed, not the name")
}

// TestClientCapsBody: a plain Client fails the body read past the cap.
func TestClientCapsBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 101))
	})
	resp, err := get(t, web.Client(srv.allowing().WithMaxResponseBytes(100)), srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, web.ErrTooLarge)
	require.Len(t, b, 100)

	resp2, err := get(t, web.Client(srv.allowing().WithMaxResponseBytes(101)), srv.URL)
	require.NoError(t, err)
	defer resp2.Body.Close()
	b, err = io.ReadAll(resp2.Body)
	require.NoError(t, err, "a body of exactly the cap is fine")
	require.Len(t, b, 101)
}

// TestImports: the package imports core/tool, core/model, core/httpmsg, core/logs
// and tools/web/httpargs and nothing else of revenant, and depends on no host package (doc.go)
// and not on net/http or net (webnet holds the side with sockets).
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const module = "github.com/revenantrt/revenant/"
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	require.NoError(t, err)
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) && p != module+"core/tool" && p != module+"core/model" && p != module+"core/httpmsg" && p != module+"core/logs" && p != module+"tools/web/httpargs" {
			t.Errorf("tools/web imports %s", p)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	require.NoError(t, err)
	for _, p := range strings.Fields(string(out)) {
		if p == "net/http" || p == "net" {
			t.Errorf("tools/web depends on %s", p)
		}
		for _, host := range []string{"github.com/ncruces", "github.com/tetratelabs", "github.com/syumai", module + "host"} {
			if p == host || strings.HasPrefix(p, host+"/") {
				t.Errorf("tools/web depends on host package %s", p)
			}
		}
	}
}

// TestNoClientSendsNothing: a policy that can neither dial nor hand
// requests to a platform's transport fails every request, allowed or not.
func TestNoClientSendsNothing(t *testing.T) {
	_, err := web.NewHTTPRequest(web.NewEgress()).Execute(context.Background(), httpCall(t, map[string]any{"url": "https://example.com/"}))
	require.ErrorIs(t, err, web.ErrNoClient)
	hook, err := web.NewWebhook(web.WebhookSpec{Name: "n", URL: "https://hooks.example.com/", Secret: web.NewSecret("0123456789abcdef")}, web.NewEgress())
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), httpCall(t, map[string]any{}))
	require.ErrorIs(t, err, web.ErrNoClient)
}

// TestSplitHostPort: the dialer's split, written without package net,
// agrees with net.SplitHostPort on what it accepts and what it returns.
func TestSplitHostPort(t *testing.T) {
	for _, addr := range []string{
		"example.com:443", "93.184.216.34:80", "[2001:db8::1]:443", "[fe80::1%eth0]:80", "[::1]:8080",
		"example.com", "example.com:", "example.com:http", "example.com:65536", "example.com:-1",
		"::1:80", "[::1]", "[::1]80", "[::1:80", "::1]:80", "a[b]:80", "[a]b]:80", ":80", "[]:80", "h:0",
	} {
		host, port, err := web.SplitHostPort(addr)
		wantHost, wantPort, wantErr := net.SplitHostPort(addr)
		n, convErr := strconv.ParseUint(wantPort, 10, 16)
		if wantErr != nil || convErr != nil {
			require.Error(t, err, addr)
			continue
		}
		require.NoError(t, err, addr)
		require.Equal(t, wantHost, host, addr)
		require.Equal(t, uint16(n), port, addr)
	}
}

// An IPv6 listener on the unspecified address ([::], dual-stack on
// Linux) is reached at its port through every loopback address, IPv6's
// and IPv4's, either written as such or as an IPv4-mapped IPv6 address,
// and through this host's own addresses: CheckAddrPort refuses them all,
// where the operator's allow_cidrs let loopback and the host's network
// through, and leaves another port alone. (TestOwnListenerRefused holds
// IPv4's 0.0.0.0 and a loopback listener.)
func TestOwnIPv6UnspecifiedListenerRefused(t *testing.T) {
	const port = 8787
	listen := netip.AddrPortFrom(netip.IPv6Unspecified(), port)
	own := netip.MustParseAddr("2001:db8::7")
	e := web.NewEgress().
		WithAllowCIDRs(netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/32")).
		WithLocalAddrs(func() ([]netip.Addr, error) { return []netip.Addr{own}, nil }).
		WithOwnListener(func() netip.AddrPort { return listen })
	for _, a := range []string{"::1", "127.0.0.1", "::ffff:127.0.0.1", own.String()} {
		ap := netip.AddrPortFrom(netip.MustParseAddr(a), port)
		require.ErrorContains(t, e.CheckAddrPort(ap), "is this server's own API", a)
		require.NoError(t, e.CheckAddrPort(netip.AddrPortFrom(ap.Addr(), port+1)), "%s at another port", a)
	}
}

// A server listening on every address (0.0.0.0) whose host's own
// addresses cannot be listed fails closed: any address the operator
// allows may be the host's own, so at the listener's port every one is
// refused as this server's own API; another port is not.
func TestOwnListenerWithUnlistableHostAddressesFailsClosed(t *testing.T) {
	const port = 8787
	e := web.NewEgress().
		WithAllowCIDRs(netip.MustParsePrefix("10.0.0.0/8")).
		WithLocalAddrs(func() ([]netip.Addr, error) { return nil, errors.New("no interfaces readable") }).
		WithOwnListener(func() netip.AddrPort { return netip.AddrPortFrom(netip.IPv4Unspecified(), port) })
	a := netip.MustParseAddr("10.1.2.3")
	require.ErrorContains(t, e.CheckAddrPort(netip.AddrPortFrom(a, port)), "is this server's own API")
	require.NoError(t, e.CheckAddrPort(netip.AddrPortFrom(a, port+1)))
}
