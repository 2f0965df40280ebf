//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Under Node, fetch answers data: URLs without a network: enough to check
// the transport's conversions and its cancellation (the workerd e2e
// streams a model through it).
func TestFetchRoundTrip(t *testing.T) {
	c := &http.Client{Transport: Fetch{}}
	resp, err := c.Get("data:text/plain,hello%20fetch")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hello fetch", string(b))
}

func TestFetchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "data:text/plain,never", nil)
	require.NoError(t, err)
	_, err = Fetch{}.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
}
