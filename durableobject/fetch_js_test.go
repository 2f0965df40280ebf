//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Under Node, fetch answers data: URLs without a network: enough to check
// the transport's conversions and its cancellation (the workerd e2e
// streams a model through it).
func TestFetchRoundTrip(t *testing.T) {
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "data:text/plain,hello%20fetch", nil)
	require.NoError(t, err)
	resp, err := Fetch{}.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, httpmsg.StatusOK, resp.StatusCode)
	require.Same(t, req, resp.Request)
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hello fetch", string(b))
}

func TestFetchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := httpmsg.NewRequest(ctx, httpmsg.MethodGet, "data:text/plain,never", nil)
	require.NoError(t, err)
	_, err = Fetch{}.Do(req)
	require.ErrorIs(t, err, context.Canceled)
}
