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
