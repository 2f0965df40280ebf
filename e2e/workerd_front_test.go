package e2e

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// frontRaw sends a request with no body and the given headers (NAME:
// value pairs) and returns the status and body.
func frontRaw(t *testing.T, s *server, method, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
