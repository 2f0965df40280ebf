package webnet_test

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// leakyResolver fails every lookup as the system resolver does, naming the
// DNS server it asked.
type leakyResolver struct{}

func (leakyResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.255.255.53:53", IsNotFound: true}
}

// TestLookupErrorHidesTheDNSServer: an http_request to a name that does
// not resolve tells the model the name and "no such host", not the
// address of the host's internal resolver.
func TestLookupErrorHidesTheDNSServer(t *testing.T) {
	h := web.NewHTTPRequest(webnet.Dialing(web.NewEgress().WithResolver(leakyResolver{})))
	_, err := h.Execute(context.Background(), tool.Call{Name: web.HTTPRequestName, Arguments: json.RawMessage(`{"url":"http://a.example/"}`), IdempotencyKey: "k"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lookup a.example: no such host")
	assert.NotContains(t, err.Error(), "10.255.255.53")
}

// TestWithoutServer: a dial's error (a webhook's configured name, which
// the dialer resolves itself) loses the server too, and other errors pass
// unchanged; the original error is not modified.
func TestWithoutServer(t *testing.T) {
	dns := &net.DNSError{Err: "no such host", Name: "hooks.internal", Server: "10.255.255.53:53", IsNotFound: true}
	op := &net.OpError{Op: "dial", Net: "tcp", Err: dns}
	got := webnet.WithoutServer(op)
	assert.Equal(t, "dial tcp: lookup hooks.internal: no such host", got.Error())
	var d *net.DNSError
	require.ErrorAs(t, got, &d)
	assert.True(t, d.IsNotFound)
	assert.Equal(t, "10.255.255.53:53", dns.Server, "the shared original is untouched")
	assert.Same(t, dns, op.Err, "and so is the dial error around it")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: net.UnknownNetworkError("x")}
	assert.Same(t, refused, webnet.WithoutServer(refused))
	assert.NoError(t, webnet.WithoutServer(nil))
}

// TestTrustedDialErrorHidesTheDNSServer: a webhook's configured name is
// resolved by the dialer itself (it is trusted as configured); when that
// lookup fails, the error the model sees does not name the DNS server.
func TestTrustedDialErrorHidesTheDNSServer(t *testing.T) {
	dial := func(_ context.Context, _, address string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(address)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: host, Server: "10.255.255.53:53", IsNotFound: true}}
	}
	spec := web.WebhookSpec{Name: "deploy", URL: "http://hooks.internal.test/hook", Secret: web.NewSecret("0123456789abcdef")}
	hook, err := web.NewWebhook(spec, webnet.DialingThrough(web.NewEgress(), dial))
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{}`), IdempotencyKey: "k"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lookup hooks.internal.test: no such host")
	assert.NotContains(t, err.Error(), "10.255.255.53")
}
