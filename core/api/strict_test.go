package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Bodies name fields exactly as documented, each once: encoding/json alone
// matches names in any case and keeps the last of two, so
// {"text":"a","TEXT":"b"} stored "b". A body is an object: null is not.
func TestStrictJSONNamesAndDuplicates(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	id := c.create()
	p := "/v1/sessions/" + id + "/prompt"
	before := f.trees.tree(id).tree.Events(id)
	cases := []struct {
		name, method, path, body string
		typ                      api.ErrorType
	}{
		{"other case after", "POST", p, `{"text":"a","TEXT":"b"}`, api.ErrInvalidRequest},
		{"other case only", "POST", p, `{"Text":"b"}`, api.ErrInvalidRequest},
		{"duplicate", "POST", p, `{"text":"a","text":"b"}`, api.ErrInvalidJSON},
		{"duplicate id", "POST", p, `{"text":"a","id":"x","id":"y"}`, api.ErrInvalidJSON},
		{"null prompt", "POST", p, `null`, api.ErrInvalidJSON},
		{"null create", "POST", "/v1/sessions", `null`, api.ErrInvalidJSON},
		{"null create, spaced", "POST", "/v1/sessions", " null\n", api.ErrInvalidJSON},
		{"create other case", "POST", "/v1/sessions", `{"Config":{}}`, api.ErrInvalidRequest},
		{"config other case", "POST", "/v1/sessions", `{"config":{"MODEL":"x"}}`, api.ErrInvalidRequest},
		{"config duplicate", "POST", "/v1/sessions", `{"config":{"model":"a","model":"b"}}`, api.ErrInvalidJSON},
		{"config twice", "POST", "/v1/sessions", `{"config":{},"config":{"model":"b"}}`, api.ErrInvalidJSON},
		{"reply other case", "POST", "/v1/sessions/" + id + "/permissions/r1", `{"reply":"once","Reply":"reject","response_id":"x"}`, api.ErrInvalidRequest},
		{"duplicate deep in answers", "POST", "/v1/sessions/" + id + "/questions/q1", `{"answers":[{"a":1,"a":2}],"response_id":"x"}`, api.ErrInvalidJSON},
		// A member named twice is invalid_json even when it is also
		// unknown, or comes after an unknown member, or is inside one.
		{"unknown prompt twice", "POST", p, `{"prompt":"x","prompt":"y"}`, api.ErrInvalidJSON},
		{"unknown prompt twice, then text", "POST", p, `{"a":1,"a":1,"text":"t"}`, api.ErrInvalidJSON},
		{"duplicate after unknown", "POST", p, `{"bogus":1,"text":"a","text":"b"}`, api.ErrInvalidJSON},
		{"duplicate inside unknown", "POST", p, `{"text":"a","bogus":{"x":1,"x":2}}`, api.ErrInvalidJSON},
		{"unknown create twice", "POST", "/v1/sessions", `{"a":1,"a":1}`, api.ErrInvalidJSON},
		{"unknown config member twice", "POST", "/v1/sessions", `{"config":{"colour":1,"colour":2}}`, api.ErrInvalidJSON},
		{"duplicate after unknown config member", "POST", "/v1/sessions", `{"config":{"MODEL":"x"},"config":{}}`, api.ErrInvalidJSON},
		{"unknown permission member twice", "POST", "/v1/sessions/" + id + "/permissions/r1", `{"a":1,"a":1}`, api.ErrInvalidJSON},
		{"unknown question member twice", "POST", "/v1/sessions/" + id + "/questions/q1", `{"a":1,"a":1}`, api.ErrInvalidJSON},
	}
	for _, tc := range cases {
		var e api.ErrorBody
		status := c.do(tc.method, tc.path, tc.body, &e)
		assert.Equal(t, http.StatusBadRequest, status, tc.name)
		assert.Equal(t, tc.typ, e.Error.Type, "%s: %s", tc.name, e.Error.Message)
	}
	assert.Equal(t, before, f.trees.tree(id).tree.Events(id), "nothing was admitted")
	assert.Len(t, f.trees.trees, 1, "nothing was created")

	var e api.ErrorBody
	c.do("POST", p, `{"TEXT":"b"}`, &e)
	assert.Equal(t, `unknown field "TEXT" (field names are case-sensitive: "text")`, e.Error.Message)
	c.do("POST", p, `{"text":"a","text":"b"}`, &e)
	assert.Equal(t, `field "text" is given twice; each field may be given once`, e.Error.Message)
	c.do("POST", "/v1/sessions", `{"config":{"MODEL":"x"}}`, &e)
	assert.Equal(t, `config: unknown field "MODEL" (field names are case-sensitive: "model")`, e.Error.Message)
	c.do("POST", p, `{"prompt":"x","prompt":"y"}`, &e)
	assert.Equal(t, `field "prompt" is given twice; each field may be given once`, e.Error.Message)

	for _, body := range []string{``, `{}`, `{"config":null}`, `{"config":{"model":"m","tools":null}}`} {
		require.Equal(t, http.StatusCreated, c.do("POST", "/v1/sessions", body, nil), body)
	}
	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"text":"a","id":"p1","mode":"queue"}`, nil))
}

// A \u escape of half a UTF-16 surrogate pair is refused like a byte that
// is not UTF-8: encoding/json reads either as U+FFFD without a word, so
// prompts with the ids "\ud800" and "\udc00" were one id to the dedup, and
// the second, with the same text, was answered "duplicate": true unadmitted.
// A whole pair is a character and is stored as that character.
func TestHalfSurrogateEscapesRefused(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	id := c.create()
	p := "/v1/sessions/" + id + "/prompt"
	before := f.trees.tree(id).tree.Events(id)
	for _, tc := range []struct{ path, body, escape string }{
		{p, `{"text":"same","id":"\ud800"}`, `\ud800`},
		{p, `{"text":"same","id":"\udc00"}`, `\udc00`},
		{p, `{"text":"a\udbff\ud800b"}`, `\udbff`},                           // high then high
		{p, `{"text":"\ud83d"}`, `\ud83d`},                                   // high at the end of a string
		{p, `{"text":"\ude00\ud83d"}`, `\ude00`},                             // a pair the wrong way round
		{p, `{"text":"ok","id":"\\\"\u00e9\udfff"}`, `\udfff`},               // after escaped \ and "
		{"/v1/sessions", `{"config":{"system_prompt":"\uD800x"}}`, `\uD800`}, // upper-case hex
		{"/v1/sessions/" + id + "/questions/q1", `{"answers":[["\ud800"]],"response_id":"r"}`, `\ud800`},
	} {
		var e api.ErrorBody
		require.Equal(t, http.StatusBadRequest, c.do("POST", tc.path, tc.body, &e), tc.body)
		assert.Equal(t, api.ErrInvalidJSON, e.Error.Type, tc.body)
		assert.Contains(t, e.Error.Message, tc.escape+" at byte", tc.body)
		assert.Contains(t, e.Error.Message, "half a UTF-16 surrogate pair", tc.body)
	}
	assert.Equal(t, before, f.trees.tree(id).tree.Events(id), "nothing was admitted")
	assert.Len(t, f.trees.trees, 1, "nothing was created")

	// A whole pair, an escaped backslash before "ud800" (no escape), and
	// non-surrogate escapes are text like any other.
	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"text":"\ud83d\ude00 \\ud800 \u00e9\uffff","id":"\uD83D\uDE00"}`, nil))
	evs := f.trees.tree(id).tree.Events(id)
	var admitted struct{ Text string }
	require.NoError(t, json.Unmarshal(evs[len(before)].Data, &admitted))
	assert.Equal(t, "😀 \\ud800 é\uffff", admitted.Text)
}

// An unclean path (empty, . or .. segments) is answered 404 in JSON, like
// every other path without a route, not with ServeMux's redirect and its
// HTML body.
func TestUncleanPathsAnswerJSON(t *testing.T) {
	h, _ := sourceHandler(t, api.Anonymous{}, true)
	for _, p := range []string{"//v1/sessions", "/v1/sessions/x/..", "/v1/./sessions", "/v1/sessions//x", "/v1/sessions/x/../../sessions",
		"//healthz", "/v1//sessions/", "/v1/sessions/x/prompt/."} {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			w := serve(h, method, p, "127.0.0.1:8787", "", "{}")
			assert.Equal(t, http.StatusNotFound, w.Code, "%s %s: %s", method, p, w.Body)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "%s %s", method, p)
			assert.Empty(t, w.Header().Get("Location"), "%s %s", method, p)
			assert.Equal(t, api.ErrNotFound, errorTypeOf(t, w), "%s %s", method, p)
		}
	}
}
