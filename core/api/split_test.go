package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The per-tree handler serves one tree it is handed, as a Durable Object
// would: no index, no identities, no other trees. A session of another
// tree is 404; a route that is not a tree's is no route.
func TestTreeHandlerServesOneTree(t *testing.T) {
	tr := treetest.New(t)
	node := tr.Boot(treetest.NewDriver(8))
	_, err := node.Inst.CreateSession(t.Context(), core.NewSession{ID: "t1", Principal: "alice"})
	require.NoError(t, err)
	h, err := api.NewTreeHandler(api.TreeDeps{Clock: fakehost.NewClock(treetest.Start)}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(h.Close)
	tree := api.Tree{RootID: "t1", Principal: "alice", Instance: node.Inst}
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeTree(nethttp.Writer(w), nethttp.Request(httptest.NewRequest(method, path, strings.NewReader(body))), tree)
		return w
	}

	require.Equal(t, http.StatusAccepted, serve("POST", "/v1/sessions/t1/prompt", `{"text":"hello"}`).Code)
	node.Idle()
	w := serve("GET", "/v1/sessions/t1?limit=10", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var snap struct {
		ID       string
		Turns    int
		Messages []struct{ Text string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &snap))
	assert.Equal(t, "t1", snap.ID)
	assert.Equal(t, 1, snap.Turns)
	require.Len(t, snap.Messages, 2)
	assert.Equal(t, "echo: hello", snap.Messages[1].Text)

	w = serve("POST", "/v1/sessions/t1/questions/q%2F1", `{"cancel":true,"response_id":"x"}`)
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Contains(t, w.Body.String(), "no pending question q/1", "path values are set as ServeMux sets them")

	for _, c := range []struct {
		method, path string
		status       int
		typ          api.ErrorType
	}{
		{"GET", "/v1/sessions/t2", http.StatusNotFound, api.ErrNotFound},              // another tree
		{"GET", "/v1/sessions/t1.9", http.StatusNotFound, api.ErrNotFound},            // no such child
		{"POST", "/v1/sessions/t1/prompt", http.StatusBadRequest, api.ErrInvalidJSON}, // the route's own error
		{"GET", "/v1/sessions", http.StatusNotFound, api.ErrNotFound},                 // the directory's
		{"DELETE", "/v1/sessions/t1/prompt", http.StatusMethodNotAllowed, api.ErrMethodNotAllowed},
	} {
		w := serve(c.method, c.path, "")
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), "%s %s", c.method, c.path)
		assert.Equal(t, c.status, w.Code, "%s %s", c.method, c.path)
		assert.Equal(t, c.typ, e.Error.Type, "%s %s", c.method, c.path)
	}
}

// The directory needs only an Index (no Get: it cannot boot a tree): it
// creates, lists and deletes trees and checks owners.
func TestDirectoryNeedsOnlyAnIndex(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	trees := newMemTrees(t, treetest.NewDriver(8))
	d, err := api.NewDirectory(api.DirectoryDeps{Index: indexOnly{trees}, Auth: tokens, IDs: &fakehost.IDs{Prefix: "r"}}, api.NewConfig())
	require.NoError(t, err)
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		nethttp.Handler(d).ServeHTTP(w, r)
		return w
	}
	w := do("POST", "/v1/sessions", "secret-a", `{}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &created))
	assert.Contains(t, do("GET", "/v1/sessions", "secret-a", "").Body.String(), created.ID)
	assert.Equal(t, http.StatusNotFound, do("DELETE", "/v1/sessions/"+created.ID, "secret-b", "").Code, "bob's")
	assert.Equal(t, http.StatusBadRequest, do("DELETE", "/v1/sessions/"+created.ID+".1", "secret-a", "").Code, "a child")
	assert.Equal(t, http.StatusNoContent, do("DELETE", "/v1/sessions/"+created.ID, "secret-a", "").Code)
	assert.Equal(t, http.StatusNotFound, do("GET", "/v1/sessions/"+created.ID+"/events", "secret-a", "").Code, "a tree route is not the directory's")
}

// indexOnly hides memTrees' Get: a directory must not need it.
type indexOnly struct{ api.Index }

// Deleting a tree through the composed handler does not boot it first:
// DELETE is the directory's, and the index stops a running tree itself.
func TestDeleteDoesNotBoot(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	id := c.create()
	gets := f.trees.getCalls(id)
	require.Equal(t, http.StatusBadRequest, c.do("DELETE", "/v1/sessions/"+id+".1", "", nil))
	require.Equal(t, http.StatusNoContent, c.do("DELETE", "/v1/sessions/"+id, "", nil))
	assert.Equal(t, gets, f.trees.getCalls(id), "DELETE reached Get (a boot)")
}
