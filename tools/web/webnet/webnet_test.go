package webnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/tool"
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
	p := web.NewEgress().WithPorts(port).WithResolver(resolver{"svc.test": {netip.MustParseAddr("127.0.0.1")}})
	_, err = send(p)
	require.ErrorIs(t, err, web.ErrDenied, "a name resolving to loopback is refused when dialed")
	require.ErrorContains(t, err, "svc.test resolves to 127.0.0.1, a loopback address")

	resp, err := send(p.WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32")))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/elsewhere", resp.Header.Get("Location"))
}

// resolver maps names to addresses, without DNS.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// get sends a GET of rawURL through p's client, closing any answer.
func get(t *testing.T, p web.Egress, rawURL string) error {
	t.Helper()
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, rawURL, nil)
	require.NoError(t, err)
	resp, err := web.Client(p).Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// ownAddr is one of this machine's non-loopback, non-link-local addresses,
// IPv4 preferred.
func ownAddr(t *testing.T) netip.Addr {
	t.Helper()
	list, err := net.InterfaceAddrs()
	require.NoError(t, err)
	var found netip.Addr
	for _, a := range list {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		addr, ok := netip.AddrFromSlice(n.IP)
		addr = addr.Unmap()
		if !ok || addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsMulticast() {
			continue
		}
		if addr.Is4() {
			return addr
		}
		if !found.IsValid() {
			found = addr
		}
	}
	if !found.IsValid() {
		t.Skip("this machine has no non-loopback address")
	}
	return found
}

// TestOwnInterfaceAddressRefused: a policy built by Dialing refuses a
// server listening on this machine's own non-loopback address (as one
// bound to 0.0.0.0 does), as a URL, as a name resolving to it and in the
// dialer's last check before connect, so no packet is sent: Dialing is
// what gives the policy the real interface list. Without it (the guest's
// and the Durable Object's policy) no address is this host's.
func TestOwnInterfaceAddressRefused(t *testing.T) {
	addr := ownAddr(t)
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server on this host's address %s was reached", addr)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).AddrPort().Port()
	target := netip.AddrPortFrom(addr, port).String()

	require.Nil(t, web.NewEgress().LocalAddrs(), "a policy without Dialing knows no own address")
	p := webnet.Dialing(web.NewEgress().WithPorts(int(port)))
	require.NotNil(t, p.LocalAddrs())
	own, err := p.LocalAddrs()()
	require.NoError(t, err)
	require.Contains(t, own, addr, "Dialing lists this host's interface addresses")
	if web.NewEgress().CheckAddr(addr) == nil {
		// A public address (on a machine whose own is, say, a documentation
		// address, another rule refuses it first).
		require.EqualError(t, p.CheckAddr(addr), "egress denied: "+addr.String()+" is an address of this host")
	}

	require.ErrorIs(t, get(t, p, "http://"+target+"/"), web.ErrDenied)
	res := resolver{"self.test": {addr}}
	err = get(t, p.WithResolver(res), "http://self.test:"+strconv.Itoa(int(port))+"/")
	require.ErrorIs(t, err, web.ErrDenied)
	require.ErrorContains(t, err, "self.test resolves to "+addr.String())

	// The dialer's Control hook refuses the socket before connect, whatever
	// a resolver answered between the check and the dial.
	conn, err := (&net.Dialer{Control: webnet.Control(p)}).Dial("tcp", target)
	if conn != nil {
		conn.Close()
	}
	require.ErrorIs(t, err, web.ErrDenied)
}

// TestDialingKeepsSettings: Dialing keeps a list of own addresses and a
// resolver set before it, and one set after it replaces its own.
func TestDialingKeepsSettings(t *testing.T) {
	a := netip.MustParseAddr("93.184.216.34")
	own := func() ([]netip.Addr, error) { return []netip.Addr{a}, nil }
	none := func() ([]netip.Addr, error) { return nil, nil }
	require.Error(t, webnet.Dialing(web.NewEgress().WithLocalAddrs(own)).CheckAddr(a))
	require.NoError(t, webnet.Dialing(web.NewEgress()).WithLocalAddrs(none).CheckAddr(a))

	// The resolver is the policy's, set before or after Dialing.
	var dialed []string
	dial := func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return nil, errors.New("test: not connecting")
	}
	res := resolver{"svc.test": {a}}
	for _, p := range []web.Egress{
		webnet.DialingThrough(web.NewEgress().WithResolver(res), dial),
		webnet.DialingThrough(web.NewEgress(), dial).WithResolver(res),
	} {
		req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "http://svc.test/", nil)
		require.NoError(t, err)
		_, err = web.Client(p.WithLocalAddrs(none).WithTimeout(time.Minute)).Do(req)
		require.ErrorContains(t, err, "test: not connecting")
	}
	require.Equal(t, []string{"93.184.216.34:80", "93.184.216.34:80"}, dialed)
}

// TestDialTriesEachCheckedAddress: a name with several addresses is dialed
// at each checked address in turn until one connects, as net.Dialer does
// with a name, so one unreachable address does not fail the request.
func TestDialTriesEachCheckedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		if addr == "93.184.216.34:80" {
			return nil, errors.New("test: unreachable")
		}
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	res := resolver{"svc.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("93.184.216.35")}}
	none := func() ([]netip.Addr, error) { return nil, nil }
	p := webnet.DialingThrough(web.NewEgress().WithResolver(res).WithLocalAddrs(none), dial)

	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "http://svc.test/", nil)
	require.NoError(t, err)
	resp, err := web.Client(p).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	require.Equal(t, []string{"93.184.216.34:80", "93.184.216.35:80"}, dialed)
}

// TestControlRefusesWhatItCannotRead: the last check before connect fails
// closed: an address it cannot parse is refused, not waved through.
func TestControlRefusesWhatItCannotRead(t *testing.T) {
	control := webnet.Control(web.NewEgress())
	require.ErrorIs(t, control("tcp", "not-an-address", nil), web.ErrDenied)
	require.NoError(t, control("tcp", "93.184.216.34:443", nil))
}

// proxyChildEnv, when set, makes TestNoProxyFromTheEnvironment the child:
// it holds the URL of the server to reach.
const proxyChildEnv = "REVENANT_WEBNET_PROXY_TARGET"

// TestNoProxyFromTheEnvironment: the transport never sends through the
// proxy the environment names (HTTP_PROXY): a proxy would connect to the
// target for us, past the address checks. net/http reads the environment
// once per process, so the request runs in a child process started with
// HTTP_PROXY set to a server that must not be reached.
func TestNoProxyFromTheEnvironment(t *testing.T) {
	if target := os.Getenv(proxyChildEnv); target != "" {
		u, err := url.Parse(target)
		require.NoError(t, err)
		port, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		// A name, not 127.0.0.1: net/http never proxies a loopback literal.
		p := web.NewEgress().WithPorts(port).WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32")).
			WithResolver(resolver{"svc.test": {netip.MustParseAddr("127.0.0.1")}})
		req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "http://svc.test:"+u.Port()+"/", nil)
		require.NoError(t, err)
		resp, err := web.Client(webnet.Dialing(p)).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "direct", string(b))
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	proxied := make(chan string, 1)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case proxied <- r.URL.String():
		default:
		}
		_, _ = io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "direct") }))
	defer target.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestNoProxyFromTheEnvironment$", "-test.count=1")
	cmd.Env = append(os.Environ(), proxyChildEnv+"="+target.URL,
		"HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=", "REQUEST_METHOD=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	select {
	case u := <-proxied:
		t.Fatalf("the request went through the environment's proxy: %s", u)
	default:
	}
}

// TestNonASCIIHostNeverDialed: net/http dials a Unicode host by its IDNA
// mapping ("ｓｖｃ．test" is dialed as svc.test), while the call's
// permission resource keeps the spelling the model wrote
// ("http:ｓｖｃ．test"), so a rule denying or asking for http:svc.test
// would not match a request that reaches svc.test. The policy refuses
// such a host before anything is dialed, as it does over a platform's
// fetch (WithTransport).
func TestNonASCIIHostNeverDialed(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		_, _ = io.WriteString(w, "reached")
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	var looked []string
	res := resolverFunc(func(host string) ([]netip.Addr, error) {
		looked = append(looked, host)
		if host == "svc.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	})
	none := func() ([]netip.Addr, error) { return nil, nil }
	p := webnet.Dialing(web.NewEgress().WithPorts(port).WithResolver(res).WithLocalAddrs(none).
		WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32")))
	h := web.NewHTTPRequest(p)

	for _, host := range []string{"ｓｖｃ.test", "svc．test", "svc。test", "s\u00advc.test", "ＳＶＣ.TEST"} {
		t.Run(host, func(t *testing.T) {
			raw, err := json.Marshal(map[string]string{"url": "http://" + host + ":" + u.Port() + "/"})
			require.NoError(t, err)
			resources, err := h.Resources(raw)
			require.NoError(t, err)
			require.NotEqual(t, []string{"http:svc.test"}, resources, "the resource is the host as written")
			_, err = h.Execute(context.Background(), tool.Call{ID: "c", Name: web.HTTPRequestName, Arguments: raw, IdempotencyKey: "k", SessionID: "s"})
			require.ErrorIs(t, err, web.ErrDenied)
			require.ErrorContains(t, err, "is not an ASCII name")
		})
	}
	require.Zero(t, hits, "no request reached the server the mapped name resolves to")
	require.Empty(t, looked, "no name was resolved")

	// The ASCII name is dialed (the server is reachable at all).
	raw, err := json.Marshal(map[string]string{"url": "http://svc.test:" + u.Port() + "/"})
	require.NoError(t, err)
	out, err := h.Execute(context.Background(), tool.Call{ID: "c", Name: web.HTTPRequestName, Arguments: raw, IdempotencyKey: "k", SessionID: "s"})
	require.NoError(t, err)
	require.Contains(t, out, "reached")
}

// resolverFunc is a web.Resolver from a function of the host.
type resolverFunc func(host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host)
}

// TestOwnListenerRefused: an operator who allows loopback (allow_cidrs
// 127.0.0.1/32) still keeps a model off this server's own API: the
// listener set with WithOwnListener is refused at its port, as a URL, as
// a name resolving to it and in the dialer's last check before connect,
// while another port on the same address stays reachable. An unspecified
// listen address (0.0.0.0) covers loopback too.
func TestOwnListenerRefused(t *testing.T) {
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server's own API was reached: %s", r.URL)
	}))
	defer own.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	ownAP := own.Listener.Addr().(*net.TCPAddr).AddrPort()
	otherAP := other.Listener.Addr().(*net.TCPAddr).AddrPort()

	loopback := web.NewEgress().WithPorts(int(ownAP.Port()), int(otherAP.Port())).
		WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32")).
		WithResolver(resolver{"self.test": {ownAP.Addr()}})
	for _, listen := range []netip.AddrPort{ownAP, netip.AddrPortFrom(netip.IPv4Unspecified(), ownAP.Port())} {
		p := webnet.Dialing(loopback.WithOwnListener(func() netip.AddrPort { return listen }))
		err := get(t, p, "http://"+ownAP.String()+"/v1/sessions")
		require.ErrorIs(t, err, web.ErrDenied, listen)
		require.ErrorContains(t, err, ownAP.String()+" is this server's own API", listen)
		err = get(t, p, "http://self.test:"+strconv.Itoa(int(ownAP.Port()))+"/v1/sessions")
		require.ErrorIs(t, err, web.ErrDenied, listen)
		require.ErrorContains(t, err, "self.test resolves to "+ownAP.Addr().String()+", and port", listen)
		require.NoError(t, get(t, p, "http://"+otherAP.String()+"/"), "another port of an allowed address")

		conn, err := (&net.Dialer{Control: webnet.Control(p)}).Dial("tcp", ownAP.String())
		if conn != nil {
			conn.Close()
		}
		require.ErrorIs(t, err, web.ErrDenied, "the socket check before connect")
	}
	require.ErrorContains(t, web.NewEgress().WithAllowCIDRs(netip.MustParsePrefix("0.0.0.0/8")).
		WithOwnListener(func() netip.AddrPort { return ownAP }).CheckAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), ownAP.Port())),
		"is this server's own API", "0.0.0.0 reaches a loopback listener")
}

// TestWebhookToTheServersOwnAPIRefused: a webhook is the operator's
// trusted destination, dialed as configured past every address rule, but
// one pointed at this server's own listener would let a model drive
// revenant's API through its arguments; its socket is refused before
// connect, by address or by a name resolving to it, while a webhook at
// another port of the same address is sent.
func TestWebhookToTheServersOwnAPIRefused(t *testing.T) {
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server's own API was reached: %s", r.URL)
	}))
	defer own.Close()
	hooked := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hooked <- r.URL.Path }))
	defer other.Close()
	ownAP := own.Listener.Addr().(*net.TCPAddr).AddrPort()
	otherAP := other.Listener.Addr().(*net.TCPAddr).AddrPort()

	for _, listen := range []netip.AddrPort{ownAP, netip.AddrPortFrom(netip.IPv4Unspecified(), ownAP.Port())} {
		p := webnet.Dialing(web.NewEgress().WithOwnListener(func() netip.AddrPort { return listen }))
		for _, url := range []string{"http://" + ownAP.String() + "/v1/sessions", "http://localhost:" + strconv.Itoa(int(ownAP.Port())) + "/v1/sessions"} {
			hook, err := web.NewWebhook(web.WebhookSpec{Name: "deploy", URL: url, Secret: web.NewSecret("0123456789abcdef")}, p)
			require.NoError(t, err)
			_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{}`), IdempotencyKey: "k"})
			require.ErrorIs(t, err, web.ErrDenied, "%s listening on %s", url, listen)
			require.ErrorContains(t, err, "is this server's own API", url)
		}
		hook, err := web.NewWebhook(web.WebhookSpec{Name: "deploy", URL: "http://" + otherAP.String() + "/hook", Secret: web.NewSecret("0123456789abcdef")}, p)
		require.NoError(t, err)
		_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{}`), IdempotencyKey: "k"})
		require.NoError(t, err, "a webhook at another port of the same address")
		require.Equal(t, "/hook", <-hooked)
	}
}
