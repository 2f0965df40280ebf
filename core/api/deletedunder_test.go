package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// promptWhile sends a prompt to session id whose route meets what f does
// to the tree once it has found the session, and returns the answer's
// status and error type.
func promptWhile(t *testing.T, f *fixture, id string, during func()) (int, api.ErrorType) {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/sessions/"+id+"/prompt", treetest.BodyThatRunsOnRead(`{"text":"hi"}`, during))
	w := httptest.NewRecorder()
	nethttp.Handler(f.h).ServeHTTP(w, req)
	var e api.ErrorBody
	if w.Code >= 400 {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), w.Body.String())
	}
	return w.Code, e.Error.Type
}

// A request that a delete of its tree overtakes (the tree's instance
// closed under it, and the delete went through) is 404, as it is sent
// again: the tree is gone. It was 503 unavailable, which told the client
// to retry a request to a tree that no longer exists. A request whose
// instance closed because the tree restarted (it runs on) stays 503: sent
// again, it is served.
func TestRequestOvertakenByADeleteIs404(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil)
	c := f.client(t, "")

	deleted := c.create()
	status, typ := promptWhile(t, f, deleted, func() { require.NoError(t, f.trees.Delete(t.Context(), deleted)) })
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, api.ErrNotFound, typ)

	restarted := c.create()
	status, typ = promptWhile(t, f, restarted, func() { f.trees.reboot(restarted) })
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, api.ErrUnavailable, typ)
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+restarted+"/prompt", `{"text":"hi"}`, nil), "sent again, it is served")
}
