package web

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// A webhook's policy trusts the one destination the operator configured,
// its host and port over http or https, and nothing else: the same host
// on another port, or under another scheme, is judged by the policy.
func TestTrustIsOneHostAndPort(t *testing.T) {
	u, err := url.Parse("https://hooks.internal:8443/notify")
	require.NoError(t, err)
	p, err := NewEgress().trusting(u)
	require.NoError(t, err)
	check := func(raw string) error {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		return p.CheckURL(u)
	}
	require.NoError(t, check("https://HOOKS.internal.:8443/other"), "the configured destination")
	require.ErrorIs(t, check("https://hooks.internal:9443/"), ErrDenied, "another port")
	require.ErrorIs(t, check("ftp://hooks.internal:8443/"), ErrDenied, "another scheme")

	_, trusted, err := p.DialTargets(context.Background(), "hooks.internal:8443", nil)
	require.NoError(t, err)
	require.True(t, trusted)
	_, trusted, _ = p.DialTargets(context.Background(), "hooks.internal:9443", nil)
	require.False(t, trusted, "another port is resolved and checked")

	_, err = NewEgress().trusting(&url.URL{Scheme: "ftp", Host: "hooks.internal:21"})
	require.ErrorIs(t, err, ErrDenied, "only http or https can be trusted")
}
