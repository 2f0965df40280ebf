package host_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			// Closed before the test's server (cleanups run last first).
			t.Cleanup(func() { _ = c.Close() })
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = io.WriteString(c, rq.method+" "+rq.path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token\r\n"+
				"Content-Length: 2000000\r\n\r\n{")
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err, "%s %s: no answer while the declared body is held back", rq.method, rq.path)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", rq.method, rq.path, body)
		}
	})
}
