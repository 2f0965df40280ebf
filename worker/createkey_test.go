package worker_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/worker"
)

// A create's Idempotency-Key values go with its decision; the front reads
// them once the body is checked, as the local server does (its digest is
// the body's), and refuses a malformed one with the local server's 400.
func TestCreateKeyAsLocal(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	d, _ := decide(t, f, http.MethodPost, "/v1/sessions", http.Header{"Idempotency-Key": {"k-1"}})
	require.Equal(t, worker.Create, d.Kind)
	assert.Equal(t, []string{"k-1"}, d.Keys)

	key, err := f.CreateKey(d.Keys, []byte(`{}`))
	require.NoError(t, err)
	local, err := api.ParseCreateKey([]string{"k-1"}, []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, local, key)
	other, err := f.CreateKey(d.Keys, nil)
	require.NoError(t, err)
	assert.NotEqual(t, key.Digest, other.Digest, "an empty body is not {}")

	d, _ = decide(t, f, http.MethodPost, "/v1/sessions", nil)
	key, err = f.CreateKey(d.Keys, nil)
	assert.NoError(t, err)
	assert.Nil(t, key, "no header, no key")

	_, err = f.CreateKey([]string{"caf\u00e9"}, nil)
	assert.Equal(t, http.StatusBadRequest, api.StatusOf(err))
}

// A create whose key the Directory knows is answered as on the local
// server: the key's tree (201 {"id"}) for the same body, 409 naming the
// key for another body or a deleted tree.
func TestKeyAnswer(t *testing.T) {
	key := api.CreateKey{Key: "k-1", Digest: "d1"}
	answer := func(rec worker.KeyRecord) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		worker.KeyAnswer(nethttp.Writer(w), key, rec)
		return w
	}
	w := answer(worker.KeyRecord{RootID: "root1", Digest: "d1", Exists: true})
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "{\"id\":\"root1\"}\n", w.Body.String())
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))

	w = answer(worker.KeyRecord{RootID: "root1", Digest: "d2", Exists: true})
	assert.Equal(t, http.StatusConflict, w.Code)
	assert.JSONEq(t, `{"error":{"type":"conflict","message":"Idempotency-Key \"k-1\" was used with a different request body"}}`, w.Body.String())

	w = answer(worker.KeyRecord{RootID: "root1", Digest: "d1", Exists: false})
	assert.Equal(t, http.StatusConflict, w.Code)
	assert.JSONEq(t, `{"error":{"type":"conflict","message":"Idempotency-Key \"k-1\" created session root1, since deleted"}}`, w.Body.String())
}
