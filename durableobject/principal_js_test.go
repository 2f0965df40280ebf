//go:build js && wasm

package durableobject

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// The front checks that the caller owns a tree before it forwards a
// request (worker/entry.mjs, owns), but the object checks again by itself:
// a front (or an owner cache) that let another principal through must not
// reach the tree. Such a request is answered as a tree not there (404),
// counted, and the owner's own requests are served as before. Before this
// test only the workerd e2e test (TestWorkerdFront) saw the object's own
// check; a js unit test sees it in seconds.
func TestObjectRefusesAnotherPrincipalByItself(t *testing.T) {
	o, _ := openedObject(t)
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status) // owned by "tester"

	read := func(principal string) *answer { return frontRead(t, o, "root", principal) }
	w := read("mallory")
	assert.Equal(t, httpmsg.StatusNotFound, w.status, "another principal: %s", w.body.String())
	assert.Contains(t, w.body.String(), `"type":"not_found"`)
	assert.Equal(t, int64(1), o.foreignRefused.Load(), "the refusal is counted")
	assert.Equal(t, httpmsg.StatusOK, read("tester").status, "the owner is served")
	assert.Equal(t, int64(1), o.foreignRefused.Load(), "the owner's request is not counted")
}

// The object serves only the tree it holds: a request that names another
// tree, or none, is answered as a tree not there (404), its principal
// never looked at. The front sets the tree header on every request it
// forwards (worker/entry.mjs, treeFetch), so one without it did not come
// through the front; the shim's own check (durableobject/shim.js) looks
// only at a header that is there.
func TestObjectServesOnlyItsOwnTree(t *testing.T) {
	o, _ := openedObject(t)
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status) // tree "root", owned by "tester"

	read := func(tree string) *answer { return frontRead(t, o, tree, "tester") }
	for _, tree := range []string{"other", ""} {
		w := read(tree)
		assert.Equal(t, httpmsg.StatusNotFound, w.status, "tree header %q: %s", tree, w.body.String())
		assert.Contains(t, w.body.String(), `"type":"not_found"`, "tree header %q", tree)
	}
	assert.Equal(t, httpmsg.StatusOK, read("root").status, "its own tree is served")
}

// A deleted tree's object answers its routes as a tree not there (404),
// whoever asks, its owner included: the owner it read before the delete
// (kept, since a tree's owner never changes) no longer admits anyone.
// Another isolate's stale owner-cache pair reaches exactly this object
// (worker/entry.mjs, owned), and so does a request that passed the
// front's owner check just before the delete.
func TestDeletedTreeAnswersNotFoundToItsOwner(t *testing.T) {
	o, _ := openedObject(t)
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status)
	require.Equal(t, httpmsg.StatusOK, frontRead(t, o, "root", "tester").status, "the owner is read and kept")
	require.Equal(t, httpmsg.StatusNoContent, serveFront(t, o, httpmsg.MethodDelete).status)
	w := frontRead(t, o, "root", "tester")
	assert.Equal(t, httpmsg.StatusNotFound, w.status, "after the delete: %s", w.body.String())
	assert.Contains(t, w.body.String(), `"type":"not_found"`)
}

// frontRead serves o the front's GET of session "root", with tree header
// tree (none if "") and principal header principal.
func frontRead(t *testing.T, o *Object, tree, principal string) *answer {
	t.Helper()
	r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://object/v1/sessions/root", nil)
	require.NoError(t, err)
	if tree != "" {
		r.Header.Set(TreeHeader, tree)
	}
	r.Header.Set(PrincipalHeader, principal)
	w := &answer{header: httpmsg.Header{}}
	o.ServeHTTP(w, r)
	return w
}
