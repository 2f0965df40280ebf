//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request from the front Worker carries its body, its length (the
// API's body cap and handlers read ContentLength) and every header value,
// repeated ones included.
func TestRequestFromJSCarriesBodyLengthAndHeaders(t *testing.T) {
	body := js.Global().Get("TextEncoder").New().Call("encode", `{"text":"hi"}`).Get("buffer")
	headers := js.Global().Get("JSON").Call("parse", `[["content-type","application/json"],["x-tag","a"],["x-tag","b"]]`)
	r, err := newRequest(context.Background(), "POST", "https://tree/v1/sessions", headers, body)
	require.NoError(t, err)
	assert.Equal(t, int64(len(`{"text":"hi"}`)), r.ContentLength)
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Equal(t, `{"text":"hi"}`, string(b))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, []string{"a", "b"}, r.Header.Values("X-Tag"))

	r, err = newRequest(context.Background(), "GET", "https://tree/v1/sessions", js.Global().Get("JSON").Call("parse", `[]`), js.Null())
	require.NoError(t, err)
	assert.Zero(t, r.ContentLength, "no body")
}
