package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

// A value that does not marshal (a stored JSON text gone bad, carried in a
// json.RawMessage) is answered as an internal error with its JSON body,
// not with the status meant for it and no body at all.
func TestWriteJSONOfAValueThatDoesNotMarshal(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(nethttp.Writer(w), http.StatusOK, map[string]json.RawMessage{"config": json.RawMessage(`{"bad`)})
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	var body ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, ErrInternal, body.Error.Type)

	w = httptest.NewRecorder()
	writeJSON(nethttp.Writer(w), http.StatusOK, map[string]int{"n": 1})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"n":1}`, w.Body.String())
}
