package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The local server answers a request it answers without reading the body
// at once, even when the body the client declared never comes in full: an
// unknown session is 404 whatever the body, and in process an interrupt
// ignores its body (docs/api.md). rawPost fails if no answer comes while
// the body is held back. Under -guest too: a route that reads no body
// gives the guest none (before session 62 the guest's host waited for the
// whole body first).
func TestIncompleteBodyOnARouteThatReadsNone(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		s := start(t, t.TempDir())
		sid := s.create()
		code, answer := rawPost(t, s, "", "/v1/sessions/nosuch/prompt", 50, []byte(`{"te`), false)
		assert.Equal(t, http.StatusNotFound, code, answer)
		code, answer = rawPost(t, s, "", "/v1/sessions/nosuch/prompt", -1, []byte(`{"te`), false)
		assert.Equal(t, http.StatusNotFound, code, "chunked, never ended: %s", answer)
		code, answer = rawPost(t, s, "", "/v1/nosuchroute", 50, []byte(`{`), false)
		assert.Equal(t, http.StatusNotFound, code, answer)
		code, answer = rawPost(t, s, "", "/v1/sessions/"+sid+"/interrupt", 50, []byte(`{`), false)
		assert.Equal(t, http.StatusOK, code, answer)
		// A body that does come is read as before, on a reused connection.
		s.prompt(sid, "after the held-back bodies")
		s.prompt(sid, "and once more")
		s.settle(sid)
	})
}
