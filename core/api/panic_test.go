package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A route that panics answers 500 internal with the JSON error body, and
// the server's log names the route and the panic; the client reads no
// detail of it.
func TestRoutePanicIsALoggedInternalError(t *testing.T) {
	var log bytes.Buffer
	h, err := api.NewTreeHandler(api.TreeDeps{Clock: fakehost.NewClock(0), Log: logs.New(slog.NewTextHandler(&log, nil))}, api.NewConfig())
	require.NoError(t, err)
	// A tree handed over with no instance: the snapshot route dereferences it.
	serveTree := httpmsg.HandlerFunc(func(w httpmsg.ResponseWriter, r *httpmsg.Request) { h.ServeTree(w, r, api.Tree{RootID: "t"}) })
	w := httptest.NewRecorder()
	nethttp.Handler(serveTree).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, api.ErrInternal, errorTypeOf(t, w))
	assert.NotContains(t, w.Body.String(), "nil pointer")
	assert.Contains(t, log.String(), "handler panicked")
	assert.Contains(t, log.String(), "/v1/sessions/{id}")
	assert.Contains(t, log.String(), "nil pointer")
}

// NewDirectory refuses page sizes outside the API's bounds, as New does:
// a list page of zero would never advance.
func TestDirectoryRefusesBadPageSizes(t *testing.T) {
	deps := api.DirectoryDeps{Index: newMemTrees(t, treetest.NewDriver(1)), Auth: api.Anonymous{}, IDs: &fakehost.IDs{}}
	for _, sessions := range []int{0, api.MaxListLimit + 1} {
		_, err := api.NewDirectory(deps, api.NewConfig().WithPageSizes(sessions, api.DefaultMessageLimit))
		assert.Error(t, err, "session page size %d", sessions)
	}
	_, err := api.NewDirectory(deps, api.NewConfig().WithPageSizes(api.MaxListLimit, api.DefaultMessageLimit))
	assert.NoError(t, err)
}
