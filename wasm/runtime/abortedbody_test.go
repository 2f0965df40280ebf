package runtime_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A route that fails halfway through its body, after its head, ends its
// answer aborted (docs/abi.md §6), and the body it had written but not
// flushed is dropped with it, as net/http drops a handler's unflushed body
// when it aborts: the host gets the head and the aborted end, never the
// half-written rest. Sent, that rest reaches a client on any host that
// streams body parts as they come (a JSON answer past net/http's buffer,
// the Cloudflare front) as bytes of an answer that was never whole.
func TestAnAbortedAnswerDropsItsUnflushedBody(t *testing.T) {
	ctx := context.Background()
	mod, err := runtime.Compile(ctx, guestbuild.MustTestHooks(t), runtime.CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	cfg := offlineConfig()
	cfg.HostMajor, cfg.HostMinor = abi.Major, abi.MinorAbort
	e := newEnv(t, 1, cfg)
	g, err := mod.Instantiate(ctx, runtime.Options{Conn: e.conn, Services: e.s})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(ctx) })
	e.g = g
	require.NoError(t, g.Boot(ctx, e.cfg))
	require.Equal(t, http.StatusCreated, e.do("POST", "/v1/sessions", map[string]any{}).status)

	const id = 100
	require.NoError(t, g.Request(ctx, id, runtime.Request{Method: "GET", Path: "/v1/sessions/" + treeID,
		Header: http.Header{"X-Revenant-Test-Hook": {"fail-after-write"}}}))
	r := e.s.responses[id]
	require.NotNil(t, r, "no head")
	require.Equal(t, http.StatusOK, r.status)
	require.True(t, r.ended, "the answer ended")
	require.Zero(t, r.body.Len(), "the aborted answer carried its unflushed body: %q", r.body.String())
	require.NotContains(t, e.s.log.String(), fmt.Sprintf("respond %d %d ", id, abi.PartBody), "a body part was sent")

	require.Equal(t, http.StatusOK, e.do("GET", "/v1/sessions/"+treeID, nil).status, "the guest serves on")
}
