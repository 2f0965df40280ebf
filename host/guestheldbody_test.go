package host_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/host"
)

// A tree's route that reads no body (an interrupt ignores its body,
// docs/api.md; a GET) is answered at once when its client declares a
// body over max_body and holds it back, in guest mode as in process: the
// guest's host must not wait for a body no route will read. (Found in
// review 62: under -guest the interrupt waited for the server's read
// timeout, then answered 400.) The body is never sent; the deadline only
// turns a hang into a failure.
func TestGuestRouteWithoutBodyAnswersWithItsBodyHeldBack(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		id := create(t, base)
		for _, rq := range []struct{ method, path string }{
			{"POST", "/v1/sessions/" + id + "/interrupt"},
			{"GET", "/v1/sessions/" + id},
		} {
			status, body := heldBackAnswer(t, base, rq.method, rq.path, 2_000_000, "")
			assert.Equal(t, http.StatusOK, status, "%s %s: %s", rq.method, rq.path, body)
		}
	})
}
