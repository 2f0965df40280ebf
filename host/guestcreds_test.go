package host

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

// A forwarded request carries only the stand-in of its token, and the
// guest's token spec accepts exactly that stand-in: the raw token never
// enters a guest, and a stand-in seen there does not open the host.
func TestGuestSeesOnlyTokenStandIns(t *testing.T) {
	const spec = "alice:alice-secret-token-0001,bob:sha256:" + "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD" // sha256("abc")
	guestSpec, err := HashTokens(spec)
	require.NoError(t, err)
	assert.NotContains(t, guestSpec, "alice-secret-token-0001")
	host, err := api.ParseTokens(spec)
	require.NoError(t, err)
	guest, err := api.ParseTokens(guestSpec)
	require.NoError(t, err)

	for _, c := range []struct{ principal, token string }{{"alice", "alice-secret-token-0001"}, {"bob", "abc"}} {
		r := httptest.NewRequest("GET", "/v1/sessions/x/events?after=3&access_token="+c.token, nil)
		r.Header.Set("Authorization", "Bearer "+c.token)
		fwd := guestCredentials(r)
		assert.NotContains(t, fwd.Header.Get("Authorization"), c.token)
		assert.NotContains(t, fwd.URL.RawQuery, c.token)
		assert.Equal(t, "3", fwd.URL.Query().Get("after"))

		p, err := guest.Authenticate(nethttp.Request(fwd), false)
		require.NoError(t, err, c.principal)
		assert.Equal(t, c.principal, p)
		fwd.Header.Del("Authorization")
		p, err = guest.Authenticate(nethttp.Request(fwd), true)
		require.NoError(t, err, c.principal)
		assert.Equal(t, c.principal, p)

		// Any case of the scheme's name (RFC 9110 §11.1) is forwarded as
		// the stand-in, never as the raw token.
		lower := r.Clone(r.Context())
		lower.Header.Set("Authorization", "bearer "+c.token)
		fwd = guestCredentials(lower)
		assert.NotContains(t, fwd.Header.Get("Authorization"), c.token)
		p, err = guest.Authenticate(nethttp.Request(fwd), false)
		require.NoError(t, err, c.principal)
		assert.Equal(t, c.principal, p)

		// The stand-in is no credential for the host, nor the raw token for the guest.
		standIn := strings.TrimPrefix(guestCredentials(r).Header.Get("Authorization"), "Bearer ")
		hr := httptest.NewRequest("GET", "/v1/sessions", nil)
		hr.Header.Set("Authorization", "Bearer "+standIn)
		_, err = host.Authenticate(nethttp.Request(hr), false)
		assert.Error(t, err)
		_, err = guest.Authenticate(nethttp.Request(r), false)
		assert.Error(t, err)
	}
}

// An access_token given twice reaches the guest twice, as stand-ins: the
// guest refuses it (401) as the local server does, rather than taking the
// first.
func TestGuestSeesEveryAccessTokenGiven(t *testing.T) {
	guestSpec, err := HashTokens("alice:alice-secret-token-0001,bob:bob-secret-token-0002")
	require.NoError(t, err)
	guest, err := api.ParseTokens(guestSpec)
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/v1/sessions/x/events?access_token=alice-secret-token-0001&access_token=bob-secret-token-0002", nil)
	fwd := guestCredentials(r)
	assert.Len(t, fwd.URL.Query()["access_token"], 2)
	assert.NotContains(t, fwd.URL.RawQuery, "secret")
	_, err = guest.Authenticate(nethttp.Request(fwd), true)
	var e *api.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, api.ErrUnauthorized, e.Type)
}

// A token spec the host would refuse is refused for the guests too, with
// the same error, rather than rewritten into a spec nobody checked.
func TestHashTokensRefusesWhatParseTokensRefuses(t *testing.T) {
	for _, spec := range []string{"no-colon", "alice:", ":secret", "alice:tok,bob:tok", "alice:sha256:nothex"} {
		_, want := api.ParseTokens(spec)
		require.Error(t, want, spec)
		_, err := HashTokens(spec)
		assert.EqualError(t, err, want.Error(), spec)
	}
}
