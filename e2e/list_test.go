package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListSaysWhatTheSessionSays: the session list's created_at is the
// root session's own, the one its snapshot shows, in both modes (the
// index records the root's, not a clock reading of its own), and the
// header that carries it from a guest to its host never reaches a client.
func TestListSaysWhatTheSessionSays(t *testing.T) { eachMode(t, testListSaysWhatTheSessionSays) }

func testListSaysWhatTheSessionSays(t *testing.T) {
	s := start(t, t.TempDir())

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/sessions", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("X-Revenant-Created-At"), "the guest's created_at header is its host's only")

	s.create()
	s.create()
	var list struct {
		Sessions []struct {
			ID        string `json:"id"`
			CreatedAt int64  `json:"created_at"`
		} `json:"sessions"`
	}
	s.do("GET", "/v1/sessions", nil, http.StatusOK, &list)
	require.Len(t, list.Sessions, 3)
	for _, item := range list.Sessions {
		var sn struct {
			CreatedAt int64 `json:"created_at"`
		}
		s.do("GET", "/v1/sessions/"+item.ID, nil, http.StatusOK, &sn)
		assert.NotZero(t, sn.CreatedAt)
		assert.Equal(t, sn.CreatedAt, item.CreatedAt, "session %s: the list's created_at is the snapshot's", item.ID)
	}
}
