package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
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

// A host that must know of a route's panic (the Durable Object gives
// itself up) is told, once the 500 is written, with the route's pattern:
// a per-tree route's and a directory route's alike.
func TestRoutePanicIsToldToTheHost(t *testing.T) {
	var told []string
	w := httptest.NewRecorder()
	panicked := func(route string) {
		assert.Equal(t, http.StatusInternalServerError, w.Code, "told after the answer")
		told = append(told, route)
	}
	h, err := api.NewTreeHandler(api.TreeDeps{Clock: fakehost.NewClock(0), Panicked: panicked}, api.NewConfig())
	require.NoError(t, err)
	serveTree := httpmsg.HandlerFunc(func(w httpmsg.ResponseWriter, r *httpmsg.Request) { h.ServeTree(w, r, api.Tree{RootID: "t"}) })
	nethttp.Handler(serveTree).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t", nil))
	assert.Equal(t, []string{"GET /v1/sessions/{id}"}, told)

	told, w = nil, httptest.NewRecorder()
	index := panickingDelete{newMemTrees(t, treetest.NewDriver(1))}
	_, err = index.Create(t.Context(), "t", api.AnonymousPrincipal, func(*core.Instance) error { return nil })
	require.NoError(t, err)
	d, err := api.NewDirectory(api.DirectoryDeps{Index: index, Auth: api.Anonymous{}, IDs: &fakehost.IDs{}, Panicked: panicked}, api.NewConfig())
	require.NoError(t, err)
	nethttp.Handler(d).ServeHTTP(w, httptest.NewRequest("DELETE", "/v1/sessions/t", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, []string{"DELETE /v1/sessions/{id}"}, told)

	// A route that fails without a panic tells nothing.
	told, w = nil, httptest.NewRecorder()
	nethttp.Handler(d).ServeHTTP(w, httptest.NewRequest("DELETE", "/v1/sessions/nope", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Empty(t, told)
}

// A route that panics with net/http's http.ErrAbortHandler (the writer's
// httpmsg.Aborter) passes the panic on, for the server to drop the
// response as net/http's convention has it: no 500 written (it would read
// as more of an answer already begun), no panic logged, the host not told.
func TestRouteAbortPanicPassesOn(t *testing.T) {
	var log bytes.Buffer
	told := false
	index := abortingDelete{newMemTrees(t, treetest.NewDriver(1))}
	_, err := index.Create(t.Context(), "t", api.AnonymousPrincipal, func(*core.Instance) error { return nil })
	require.NoError(t, err)
	d, err := api.NewDirectory(api.DirectoryDeps{Index: index, Auth: api.Anonymous{}, IDs: &fakehost.IDs{},
		Log: logs.New(slog.NewTextHandler(&log, nil)), Panicked: func(string) { told = true }}, api.NewConfig())
	require.NoError(t, err)
	w := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		nethttp.Handler(d).ServeHTTP(w, httptest.NewRequest("DELETE", "/v1/sessions/t", nil))
	})
	assert.False(t, w.Code != http.StatusOK || w.Body.Len() > 0 || len(w.Header()) > 0, "an answer was written: %d %s", w.Code, w.Body)
	assert.Empty(t, log.String())
	assert.False(t, told)
}

// abortingDelete is an index whose Delete aborts the response.
type abortingDelete struct{ *memTrees }

func (abortingDelete) Delete(context.Context, string) error { panic(http.ErrAbortHandler) }

// panickingDelete is an index whose Delete panics.
type panickingDelete struct{ *memTrees }

func (panickingDelete) Delete(context.Context, string) error { panic("delete cut short") }

// An error the API did not raise itself is answered 500 internal with no
// detail, and the detail is logged; a client's mistake is not logged.
func TestInternalErrorsAreLogged(t *testing.T) {
	var log bytes.Buffer
	trees := newMemTrees(t, treetest.NewDriver(1))
	h, err := api.New(api.Deps{Trees: trees, Auth: api.Anonymous{}, Clock: fakehost.NewClock(0), IDs: &fakehost.IDs{},
		Log: logs.New(slog.NewTextHandler(&log, nil))}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(h.Close)
	serve := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}

	w := serve("/v1/sessions/nope")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Empty(t, log.String(), "a client's mistake is not the server's to log")

	trees.fail = errors.New("disk on fire")
	w = serve("/v1/sessions/nope")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.NotContains(t, w.Body.String(), "disk on fire")
	assert.Contains(t, log.String(), "request failed")
	assert.Contains(t, log.String(), "disk on fire")
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
