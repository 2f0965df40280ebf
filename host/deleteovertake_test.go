package host_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/host"
)

// deleteOnRead is a request body that deletes tree id from h when the
// handler first reads it: after the route found the session, before its
// write.
type deleteOnRead struct {
	t    *testing.T
	h    *host.Host
	id   string
	done bool
	body *strings.Reader
}

func (b *deleteOnRead) Read(p []byte) (int, error) {
	if !b.done {
		b.done = true
		require.NoError(b.t, b.h.Delete(ctx, b.id))
	}
	return b.body.Read(p)
}

// On the local server serving trees in process, a prompt that a delete of
// its tree overtakes (the delete closed the tree's instance under it and
// went through) is 404, as it is sent again, not 503 unavailable, which
// told the client to retry a request to a tree that no longer exists.
func TestPromptOvertakenByADeleteIs404(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "t")
	auth, err := api.ParseTokens(tokenSpec)
	require.NoError(t, err)
	a, err := api.New(api.Deps{Trees: h, Auth: auth, Clock: host.RealClock{}, IDs: &fakehost.IDs{Prefix: "api"}}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(a.Close)

	req := httptest.NewRequest("POST", "/v1/sessions/t/prompt", &deleteOnRead{t: t, h: h, id: "t", body: strings.NewReader(`{"text":"hi"}`)})
	req.Header.Set("Authorization", "Bearer alice-token")
	w := httptest.NewRecorder()
	nethttp.Handler(a).ServeHTTP(w, req)
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	require.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
	require.Equal(t, api.ErrNotFound, body.Error.Type)
}
