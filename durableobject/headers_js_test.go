//go:build js && wasm

package durableobject

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
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

// The object takes its principal only from the front Worker's header,
// path-escaped there: a missing, empty or badly escaped one is refused
// (401), never read as some principal.
func TestFrontPrincipalHeader(t *testing.T) {
	for header, want := range map[string]string{"alice": "alice", "a%20b%2Fc": "a b/c"} {
		r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://tree/v1/sessions/x", nil)
		require.NoError(t, err)
		r.Header.Set(PrincipalHeader, header)
		got, err := frontPrincipal{}.Authenticate(r, false)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, header := range []string{"", "%zz", "%"} {
		r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://tree/v1/sessions/x", nil)
		require.NoError(t, err)
		if header != "" {
			r.Header.Set(PrincipalHeader, header)
		}
		_, err = frontPrincipal{}.Authenticate(r, false)
		var ae *api.Error
		require.ErrorAs(t, err, &ae, "%q", header)
		assert.Equal(t, api.ErrUnauthorized, ae.Type)
	}
}

// Ids the object mints (child sessions, turns) are lowercase base32 like
// the front's and the local server's (docs/api.md).
func TestObjectIDsAreLowercase(t *testing.T) {
	id := IDs{}.NewID()
	assert.Len(t, id, 26)
	assert.Equal(t, strings.ToLower(id), id)
	assert.NotEqual(t, id, IDs{}.NewID())
}

// A request's field values reach the object without the whitespace around
// them, as net/http gives them to the local server: workerd passes a
// value's trailing spaces on, and "Last-Event-ID: 1 " was then refused
// here while the local server read 1.
func TestHeadersFromJSTrimsTheWhitespaceAround(t *testing.T) {
	got := httpmsg.Header{}
	require.NoError(t, headersFromJS(got, jsJSON.Call("parse", `[["last-event-id","1 "],["authorization"," Bearer  tok\t"]]`)))
	assert.Equal(t, httpmsg.Header{"Last-Event-Id": {"1"}, "Authorization": {"Bearer  tok"}}, got)
}
