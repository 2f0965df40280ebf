package serve_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// answerWith makes the tree's guest answer every request with a 200 head,
// part of a JSON body, and an end that is aborted or not, as a guest of
// ABI 1.11 ends a route that failed after its head (docs/abi.md §6).
func answerWith(tree *serve.Tree, aborted bool) {
	serve.SetRequest(tree, func(_ *runtime.Guest, id uint64, _ runtime.Request) error {
		serve.RespondLocked(tree, id, abi.ResponsePart{Kind: abi.PartHead, Status: http.StatusOK,
			Header: httpmsg.Header{"Content-Type": {"application/json"}}})
		serve.RespondLocked(tree, id, abi.ResponsePart{Kind: abi.PartBody, Body: []byte(`{"id":`)})
		serve.RespondLocked(tree, id, abi.ResponsePart{Kind: abi.PartEnd, Aborted: aborted})
		return nil
	})
}

// getBody reads the answer to a GET of url whole: the status and body, or
// the error of a response cut short (at its head or in its body). hook, if
// set, asks the test guest for a test hook (its X-Revenant-Test-Hook).
func getBody(t *testing.T, url, hook string) (int, string, error) {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if hook != "" {
		req.Header.Set("X-Revenant-Test-Hook", hook)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// A response the guest aborts after its head (a route that panicked or
// failed once its answer began) is cut short for the client, as core/api
// aborts it in process: the client's read fails. The host used to end it
// as complete, so a client read a 200 whose body was cut as the whole
// answer. A clean end still reads as complete.
func TestServeAbortedEndCutsTheResponse(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, http.StatusCreated, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)

	answerWith(w.tree, false)
	status, body, err := getBody(t, srv.URL+"/v1/sessions/tree1", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, `{"id":`, body)

	answerWith(w.tree, true)
	status, body, err = getBody(t, srv.URL+"/v1/sessions/tree1", "")
	require.Error(t, err, "the aborted response read as complete: %d %q", status, body)
	w.quiet(t)
	require.Zero(t, serve.Requests(w.tree), "the aborted request is forgotten")
}

// Through the guest itself (the test guest, whose hook makes a route's
// first body write panic once its head is out, as a route's bug would): a
// 200 that core/api aborts inside the guest reaches its client cut short,
// and the guest serves on. To a host that announced 1.10, which knows no
// aborted end, the guest ends the answer cleanly, as before 1.11.
func TestServeGuestRouteFailingAfterItsHeadIsCut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hostMinor uint16
		cut       bool
	}{
		{"host 1.11", abi.MinorAbort, true},
		{"host 1.10", abi.MinorAbort - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boot := offline()
			boot.HostMajor, boot.HostMinor = abi.Major, tc.hostMinor
			srv, w := startTreeOf(t, testGuest.compile(t, guestbuild.MustTestHooks), serve.Config{Boot: boot})
			require.Equal(t, http.StatusCreated, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)

			status, body, err := getBody(t, srv.URL+"/v1/sessions/tree1", "fail-after-head")
			if tc.cut {
				require.Error(t, err, "the answer cut short read as complete: %d %q", status, body)
			} else {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status)
				require.Empty(t, body)
			}

			status, _, err = getBody(t, srv.URL+"/v1/sessions/tree1", "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, "the guest serves on")
			require.Equal(t, 1, serve.Generation(w.tree), "the same guest: the failure did not kill it")
			w.quiet(t)
			require.Zero(t, serve.Requests(w.tree))
		})
	}
}

// A guest that dies between its head and its end (a trap, its watchdog, a
// kill) cuts its answer short for the client, as an aborted end does: the
// host used to end it as complete, so a client read a 200 whose body had
// stopped as the whole answer. A guest that ended its answer before it
// died leaves the answer complete.
func TestServeGuestDeadAfterItsHeadCutsTheResponse(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, http.StatusCreated, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)

	dieAfter := func(parts ...abi.ResponsePart) {
		serve.SetRequest(w.tree, func(g *runtime.Guest, id uint64, _ runtime.Request) error {
			for _, p := range parts {
				serve.RespondLocked(w.tree, id, p)
			}
			_ = g.Close(context.Background())
			return errors.New("trap")
		})
	}
	head := abi.ResponsePart{Kind: abi.PartHead, Status: http.StatusOK, Header: httpmsg.Header{"Content-Type": {"application/json"}}}
	body := abi.ResponsePart{Kind: abi.PartBody, Body: []byte(`{"id":`)}

	dieAfter(head, body)
	status, got, err := getBody(t, srv.URL+"/v1/sessions/tree1", "")
	require.Error(t, err, "the answer of a guest that died read as complete: %d %q", status, got)

	dieAfter(head, body, abi.ResponsePart{Kind: abi.PartEnd})
	status, got, err = getBody(t, srv.URL+"/v1/sessions/tree1", "")
	require.NoError(t, err, "an answer the guest ended before it died is complete")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, `{"id":`, got)
}
