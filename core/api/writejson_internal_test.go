package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/logs"
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

// The 500 of a value that does not marshal is logged, since the client
// reads only "internal error", and it drops the headers set for the
// answer meant (a Location), keeping who may read it (CORS).
func TestWriteJSONFailureIsLoggedAndDropsTheMeantHeaders(t *testing.T) {
	var log bytes.Buffer
	h := handle(logs.New(slog.NewTextHandler(&log, nil)), "POST /v1/sessions", nil, func(w httpmsg.ResponseWriter, _ *httpmsg.Request) error {
		w.Header().Set("Access-Control-Allow-Origin", "https://app.example")
		w.Header().Set("Location", "/v1/sessions/s1")
		writeJSON(w, http.StatusCreated, map[string]json.RawMessage{"config": json.RawMessage(`{"bad`)})
		return nil
	})
	w := httptest.NewRecorder()
	nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("POST", "/v1/sessions", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Empty(t, w.Header().Get("Location"))
	assert.Equal(t, "https://app.example", w.Header().Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Contains(t, log.String(), "level=ERROR")
	assert.Contains(t, log.String(), "answer did not marshal")
	assert.Contains(t, log.String(), `route="POST /v1/sessions"`)
}
