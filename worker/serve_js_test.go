//go:build js && wasm

package worker

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func jsPairs(pairs ...[2]string) js.Value {
	a := make([]any, len(pairs))
	for i, p := range pairs {
		a[i] = []any{p[0], p[1]}
	}
	return js.ValueOf(a)
}

// The front reads a header's value without the whitespace around it, as
// the local server (net/http) does: workerd passes a value's trailing
// spaces on, and "Authorization: Bearer tok " was 401 on Cloudflare while
// the local server served it.
func TestDecideJSTrimsHeaderValues(t *testing.T) {
	f, err := New(Options{Tokens: "alice:tok"})
	require.NoError(t, err)
	for _, v := range []string{"Bearer tok ", "Bearer tok\t", "Bearer tok  \t"} {
		d, ok := f.decideJS("GET", "https://front.example/v1/sessions", jsPairs([2]string{"authorization", v})).(map[string]any)
		require.True(t, ok)
		assert.Equal(t, int(List), d["kind"], "%q: %v", v, d)
		assert.Equal(t, "alice", d["principal"], "%q", v)
	}
}

// Every JSON answer the front writes itself carries nosniff, as docs/api.md
// says of every JSON response and as the local server's do: the list page
// (pageJS) and a panicking entry point's 500 had only the Content-Type.
func TestFrontAnswersAreNosniff(t *testing.T) {
	for name, a := range map[string]any{
		"page":     pageJS(`{"trees":[],"more":false}`),
		"internal": answerObject(500, jsonHeader(), internalError),
	} {
		m := a.(map[string]any)
		assert.Contains(t, m["headers"], []any{"X-Content-Type-Options", "nosniff"}, name)
		assert.Contains(t, m["headers"], []any{"Content-Type", "application/json"}, name)
		assert.Contains(t, m["headers"], []any{"Cache-Control", "no-store"}, name)
	}
}

// A preflight's 204 carries a null body: entry.mjs's answer() passes the
// body on to new Response, and workerd logs "Constructing a Response with
// a null body status (204) and a non-null, zero-length body" for "", once
// per preflight a browser sends.
func TestPreflightAnswerHasNullBody(t *testing.T) {
	f, err := New(Options{Tokens: "alice:tok", AllowedOrigins: []string{"https://console.example"}})
	require.NoError(t, err)
	d, ok := f.decideJS("OPTIONS", "https://front.example/v1/sessions", jsPairs(
		[2]string{"origin", "https://console.example"}, [2]string{"access-control-request-method", "POST"})).(map[string]any)
	require.True(t, ok)
	require.Equal(t, 204, d["status"], "%v", d)
	assert.Nil(t, d["body"], "a 204's body must be null for new Response")
	assert.True(t, js.ValueOf(d).Get("body").IsNull())
	// An answer with a body keeps it.
	d = f.decideJS("GET", "https://front.example/v1/sessions", jsPairs()).(map[string]any)
	assert.Equal(t, 401, d["status"])
	assert.Contains(t, d["body"], "unauthorized")
}
