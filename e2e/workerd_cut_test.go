package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Cloudflare cancels a fetch handler's pending promises when its client
// disconnects, except those given to ctx.waitUntil. The front's create
// commits the tree in its object, then records it in the caller's
// directory; its delete deletes the tree in its object, then the row. A
// client gone between the two must not stop the second: a tree no row
// records could never be listed, read or deleted (its id went to nobody),
// and a row whose tree is gone is a listed session answering 404.
//
// Local workerd does not notice an HTTP client's disconnect while the
// handler waits (through wrangler dev or by itself), but it cancels a
// request whose caller aborts it the same way. So the test build's cut
// (worker/entry.mjs, the X-Revenant-Test-Cut header) sends the client's
// request to the Worker itself through a service binding (SELF, which
// only the test's wrangler.toml has), aborts it once the tree's object
// holds its answer (the commit done; durableobject/testhold.mjs), then
// lets that answer go on. It answers once the promises the request gave
// to ctx.waitUntil have settled, and says how many there were: a step
// not given to it was cancelled with the request, and the test reads
// that at once instead of waiting for a line that never comes.

// selfService gives the Worker a service binding to itself, SELF, for the
// test build's cut.
const selfService = "[[services]]\nbinding = \"SELF\"\nservice = \"revenant\""

// cutRequest sends method path as s's client through the test build's
// cut, which aborts the request once the tree's object holds its answer
// to a request of kind (create, delete) and then lets it go on; it
// returns the tree's id once what the request gave to ctx.waitUntil has
// settled, and requires that it gave something. header are more of the
// request's headers (name, value, …).
func cutRequest(t *testing.T, s *server, method, path, kind string, header ...string) string {
	t.Helper()
	code, body := frontRaw(t, s, method, path, append([]string{"X-Revenant-Test-Cut", kind}, header...)...)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var out struct {
		Root    string `json:"root"`
		Cut     bool   `json:"cut"`
		Lasting int    `json:"lasting"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.True(t, out.Cut, "the request was aborted while the object held its answer: %s", body)
	require.NotEmpty(t, out.Root)
	require.Positive(t, out.Lasting, "the request's steps were given to ctx.waitUntil, to outlive its client: %s", body)
	return out.Root
}

// TestWorkerdCreateOutlivesItsClient: a create whose client went away
// once the object committed the tree is still recorded: the client that
// lost the answer finds its session in its list, and can read it. Read
// after a SIGKILL, every tree stored is listed.
func TestWorkerdCreateOutlivesItsClient(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdTOML(t, "revenant_testroutes", selfService, "REVENANT_TOKENS:"+frontTokens)
	alice := w.as(t, "a-token")
	kept := alice.create()
	root := cutRequest(t, alice, "POST", "/v1/sessions", "create")
	assert.ElementsMatch(t, []string{kept, root}, alice.listed(), "the cut create is listed")
	assert.Equal(t, http.StatusOK, frontStatus(t, alice, "GET", "/v1/sessions/"+root), "and readable")
	w.kill(t)
	assert.Equal(t, 2, w.treesStored(t), "the trees stored are the two listed")
}

// TestWorkerdDeleteOutlivesItsClient: a delete whose client went away
// once the object deleted the tree still deletes its row: the session is
// no longer listed. Read after a SIGKILL, its tree's storage is empty.
func TestWorkerdDeleteOutlivesItsClient(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdTOML(t, "revenant_testroutes", selfService, "REVENANT_TOKENS:"+frontTokens)
	alice := w.as(t, "a-token")
	kept, gone := alice.create(), alice.create()
	require.Equal(t, gone, cutRequest(t, alice, "DELETE", "/v1/sessions/"+gone, "delete"))
	assert.Equal(t, []string{kept}, alice.listed(), "the cut delete's row is gone")
	assert.Equal(t, http.StatusNotFound, frontStatus(t, alice, "GET", "/v1/sessions/"+gone))
	w.kill(t)
	assert.Equal(t, 1, w.treesStored(t), "only the kept tree holds anything")
}
