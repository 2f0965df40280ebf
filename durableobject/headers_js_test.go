//go:build js && wasm

package durableobject

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Headers cross as [name, value] pairs both ways: repeated names keep
// every value in order, and quotes, backslashes and Latin-1 survive the
// JSON in between.
func TestHeadersRoundTripThroughJS(t *testing.T) {
	h := httpmsg.Header{}
	h.Add("X-Many", "one")
	h.Add("X-Many", `two "quoted" \ back`)
	h.Add("Content-Type", "text/event-stream; charset=utf-8")
	h.Add("X-Latin", "caf\u00e9")
	v := headersToJS(h)
	require.Equal(t, 4, v.Length())
	got := httpmsg.Header{}
	require.NoError(t, headersFromJS(got, v))
	assert.Equal(t, h, got)
}

// What is not an array of string pairs is an error, never a panic.
func TestHeadersFromJSRefusesOtherShapes(t *testing.T) {
	for _, src := range []string{`{"a": 1}`, `[["a", 1]]`, `"x"`} {
		err := headersFromJS(httpmsg.Header{}, jsJSON.Call("parse", src))
		assert.Error(t, err, src)
	}
}
