package host

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A create's answer is recorded, not sent: a guest that cuts it short
// after its head (it died between head and end; serve.Tree panics with
// http.ErrAbortHandler, as net/http expects) must be reported to the
// create, which undoes itself (errCreateCut), instead of reaching the
// create as a 201 with no body, or the server as a panic. Any other panic
// is not swallowed.
func TestCreateAnswerCutShortIsReported(t *testing.T) {
	req := httptest.NewRequest("POST", "/v1/sessions", nil)
	cut := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		panic(http.ErrAbortHandler)
	})
	rec := &recorder{header: http.Header{}}
	assert.True(t, cutShort(cut, rec, req))
	assert.Equal(t, http.StatusCreated, rec.status)

	whole := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"x"}`))
	})
	rec = &recorder{header: http.Header{}}
	assert.False(t, cutShort(whole, rec, req))
	assert.Equal(t, `{"id":"x"}`, string(rec.body))

	bug := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") })
	require.PanicsWithValue(t, "a bug", func() { cutShort(bug, &recorder{header: http.Header{}}, req) })
}
