package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWorkerdFailedOwnerReadOfADelete: a delete whose owner check could
// not be made (the test build's REVENANT_TEST_FAIL_OWNER_READ fails each
// tree's first owner read, 500, as a storage error would) is answered
// 503 and deletes nothing, as TestWorkerdFailedOwnerRead has it for a
// read: the front cannot tell whose tree it is. A front that read the
// failure as "go on" (checking only for "not yours") would delete the
// tree, and its row, on the word of the object's own check alone; its
// owner's delete here would answer 204. The delete sent again is served.
func TestWorkerdFailedOwnerReadOfADelete(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_OWNER_READ:on", "REVENANT_OWNER_CACHE:off")
	s := w.client(t)
	sid := s.create()
	code, body := frontRaw(t, s, http.MethodDelete, "/v1/sessions/"+sid)
	assert.Equal(t, http.StatusServiceUnavailable, code, "the delete's owner check failed: %s", body)
	assert.Contains(t, body, "the session directory did not answer")
	w.waitLog(t, "revenant test: the directory failed a request: GET "+sid, waitTimeout)
	assert.Equal(t, http.StatusOK, frontStatus(t, s, http.MethodGet, "/v1/sessions/"+sid), "the tree is still there")
	assert.Equal(t, []string{sid}, s.listed(), "and still listed")

	assert.Equal(t, http.StatusNoContent, frontStatus(t, s, http.MethodDelete, "/v1/sessions/"+sid), "the delete sent again")
	assert.Empty(t, s.listed())
}
