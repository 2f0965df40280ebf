package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
)

type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// An error the host answers itself, before the guest has the request, is
// the API's error as core/api writes it, nosniff included (docs/api.md:
// every JSON response), with the local server's words for a body that
// could not be read.
func TestHostErrorIsTheAPIs(t *testing.T) {
	tr := &Tree{}
	rec := httptest.NewRecorder()
	tr.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sessions/x/prompt", failingBody{}))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	var e api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	assert.Equal(t, api.ErrInvalidRequest, e.Error.Type)
	assert.Equal(t, "could not read the request body", e.Error.Message)
}
