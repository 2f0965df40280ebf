package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPRequestCannotCallTheServersOwnAPI: an operator who lets a model
// reach loopback (allow_cidrs 127.0.0.1/32, the port allowed, the tool
// allowed) still keeps http_request off the running server's own API, in
// process and with guests (whose http_request is the host's), while
// another server on loopback stays reachable: the server hands the
// address it listens on to the tools' egress.
func TestHTTPRequestCannotCallTheServersOwnAPI(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "another server answered")
		}))
		defer other.Close()
		otherPort := other.Listener.Addr().(*net.TCPAddr).Port
		// The server's port, known before it starts so the config can
		// allow it (a port the system chose would be known too late).
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())

		dir := t.TempDir()
		path := filepath.Join(dir, "config.json")
		require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `{"egress": {"allow_cidrs": ["127.0.0.1/32"], "ports": [%d, %d]},
			"permissions": [{"action": "http_request", "resource": "*", "decision": "allow"}]}`, port, otherPort), 0o600))
		s := startWith(t, filepath.Join(dir, "data"), "REVENANT_CONFIG="+path, fmt.Sprintf("REVENANT_ADDR=127.0.0.1:%d", port))
		sid := s.create()

		reply := func(url string) string {
			t.Helper()
			a := s.prompt(sid, `/tool http_request {"url": "`+url+`"}`)
			s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")
			var text []string
			for _, m := range s.snapshot(sid).Messages {
				if m.PromptID == a && m.Role == "assistant" {
					text = append(text, m.Text)
				}
			}
			return strings.Join(text, "\n")
		}
		assert.Contains(t, reply(fmt.Sprintf("http://127.0.0.1:%d/v1/sessions", port)), "is this server's own API")
		assert.Contains(t, reply(other.URL+"/"), "another server answered", "another port on loopback")
	})
}
