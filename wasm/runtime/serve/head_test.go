package serve_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// A HEAD of a tree's route sends the Content-Length its GET would, as the
// in-process server does: net/http counts a small answer written whole
// before the handler returns, so the body must not be flushed part by
// part (only an event stream is). A flush after each part sent the head
// at the first part, before any length was known, so a guest's HEAD had
// no Content-Length and its GET went out chunked.
func TestServeHeadSendsContentLength(t *testing.T) {
	srv := startTree(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)

	for _, path := range []string{"/v1/sessions/tree1", "/v1/sessions/tree1/questions", "/v1/sessions/tree1/permissions"} {
		get, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(get.Body)
		get.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, get.StatusCode, path)
		require.Equal(t, int64(len(body)), get.ContentLength, "GET %s: no Content-Length (sent chunked)", path)

		head, err := client.Head(srv.URL + path)
		require.NoError(t, err)
		head.Body.Close()
		require.Equal(t, http.StatusOK, head.StatusCode, path)
		require.Equal(t, int64(len(body)), head.ContentLength, "HEAD %s: not the GET's Content-Length", path)
	}
}
