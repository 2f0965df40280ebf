package host_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var idValue = regexp.MustCompile(`"id":"[^"]*"`)

// keyedAnswer is what a client reads of a create's answer: its status,
// the headers an answer's shape is made of, and its body.
type keyedAnswer struct {
	Status  int
	Headers string
	Body    string
}

// createWithKey sends POST /v1/sessions as token with body and the
// Idempotency-Key header's values (none: no header).
func createWithKey(t *testing.T, base, token, body string, keys ...string) keyedAnswer {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/sessions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var hs []string
	for _, k := range []string{"Content-Type", "X-Content-Type-Options", "Cache-Control"} {
		hs = append(hs, k+": "+resp.Header.Get(k))
	}
	return keyedAnswer{Status: resp.StatusCode, Headers: strings.Join(hs, "; "), Body: string(b)}
}

// A create with an Idempotency-Key, sent again, is answered as the first
// was (201, the same id, the same body and headers) and makes no second
// tree, in process and under -guest alike; the same key with another body
// and a key whose tree was deleted are 409 conflict naming the key; a
// malformed key is 400 and creates nothing; a refused create leaves its
// key free. Both modes answer every request the same.
func TestCreateIdempotencyKeyOverHTTP(t *testing.T) {
	run := func(t *testing.T, guest bool) []keyedAnswer {
		_, h := openIn(t, guest)
		base := apiServer(t, h, guest)
		var out []keyedAnswer
		do := func(token, body string, keys ...string) keyedAnswer {
			a := createWithKey(t, base, token, body, keys...)
			out = append(out, a)
			return a
		}
		first := do("alice-token", `{}`, "create-1")
		require.Equal(t, http.StatusCreated, first.Status, first.Body)
		retry := do("alice-token", `{}`, "create-1")
		assert.Equal(t, first, retry, "a retry is answered as the first create was")
		var created struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(first.Body), &created))
		id := created.ID
		require.NotEmpty(t, id, "201 body: %s", first.Body)

		other := do("alice-token", `{"config":{"system_prompt":"x"}}`, "create-1")
		assert.Equal(t, http.StatusConflict, other.Status)
		assert.Contains(t, other.Body, `Idempotency-Key \"create-1\" was used with a different request body`)

		for _, keys := range [][]string{{strings.Repeat("k", 201)}, {""}, {"caf\u00e9"}, {"a\tb"}, {"a", "a"}} {
			bad := do("alice-token", `{}`, keys...)
			assert.Equal(t, http.StatusBadRequest, bad.Status, "%q", keys)
			assert.Contains(t, bad.Body, `"invalid_request"`, "%q", keys)
			assert.Contains(t, bad.Body, "Idempotency-Key", "%q", keys)
		}
		assert.Equal(t, http.StatusCreated, do("alice-token", `{}`, strings.Repeat("k", 200)).Status, "200 bytes is a key")

		refused := do("alice-token", `{"config":{"bogus":1}}`, "create-2")
		assert.Equal(t, http.StatusBadRequest, refused.Status)
		assert.Equal(t, http.StatusCreated, do("alice-token", `{}`, "create-2").Status, "a refused create leaves its key free")

		bobs := do("bob-token", `{}`, "create-1")
		assert.Equal(t, http.StatusCreated, bobs.Status)
		assert.NotEqual(t, first.Body, bobs.Body, "a key is its principal's")

		list := call(t, base, "GET", "/v1/sessions", "alice-token", "")
		assert.Len(t, list.Body["sessions"], 3, "one tree per key; none for a malformed key")

		require.Equal(t, http.StatusNoContent, call(t, base, "DELETE", "/v1/sessions/"+id, "alice-token", "").Status)
		spent := do("alice-token", `{}`, "create-1")
		assert.Equal(t, http.StatusConflict, spent.Status)
		assert.Contains(t, spent.Body, `Idempotency-Key \"create-1\" created session `+id+`, since deleted`)
		list = call(t, base, "GET", "/v1/sessions", "alice-token", "")
		assert.Len(t, list.Body["sessions"], 2, "a spent key makes no tree, nor did a malformed one")

		// The ids differ between the runs.
		for i := range out {
			out[i].Body = idValue.ReplaceAllString(out[i].Body, `"id":ID`)
			out[i].Body = strings.ReplaceAll(out[i].Body, id, "ID")
		}
		return out
	}
	var inProcess []keyedAnswer
	t.Run("inprocess", func(t *testing.T) { inProcess = run(t, false) })
	t.Run("guest", func(t *testing.T) {
		got := run(t, true)
		require.Len(t, got, len(inProcess))
		for i := range got {
			assert.Equal(t, inProcess[i], got[i], "request %d", i)
		}
	})
}
