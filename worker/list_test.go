package worker_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/worker"
)

func TestDecideListAsksTheDirectoryForThePage(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	d, w := decide(t, f, "GET", "/v1/sessions", nil)
	assert.Equal(t, worker.List, d.Kind)
	assert.Equal(t, "/trees?limit=50", d.URL, "the local server's default limit")
	assert.Zero(t, w.Body.Len())

	c := api.ListCursor{CreatedAt: 1700000000123, ID: "abc"}
	d, _ = decide(t, f, "GET", "/v1/sessions?limit=2&cursor="+c.Encode(), nil)
	assert.Equal(t, worker.List, d.Kind)
	assert.Equal(t, "/trees?after_at=1700000000123&after_id=abc&limit=2", d.URL)
}

func TestDecideRefusesABadListQueryBeforeTheDirectory(t *testing.T) {
	f, err := worker.New(worker.Options{Tokens: "alice:a-token"})
	require.NoError(t, err)
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "cursor=!!", "cursor=" + api.ListCursor{ID: "a/b"}.Encode()} {
		d, w := decide(t, f, "GET", "/v1/sessions?"+q, http.Header{"Authorization": {"Bearer a-token"}})
		assert.Equal(t, worker.Answered, d.Kind, q)
		assert.Equal(t, http.StatusBadRequest, w.Code, q)
		assert.Contains(t, w.Body.String(), `"type":"invalid_request"`, q)
	}
	// The token comes first: a stranger learns nothing from the query.
	d, w := decide(t, f, "GET", "/v1/sessions?limit=0", nil)
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
}

func TestListAnswerIsTheLocalServersPage(t *testing.T) {
	body, err := worker.ListAnswer([]byte(`{"trees":[{"root_id":"b","created_at":20},{"root_id":"a","created_at":10}],"more":true}`))
	require.NoError(t, err)
	next := api.ListCursor{CreatedAt: 10, ID: "a"}.Encode()
	assert.Equal(t, `{"next_cursor":"`+next+`","sessions":[{"id":"b","created_at":20},{"id":"a","created_at":10}]}`+"\n", string(body))

	body, err = worker.ListAnswer([]byte(`{"trees":[{"root_id":"a","created_at":10}],"more":false}`))
	require.NoError(t, err)
	assert.Equal(t, `{"next_cursor":"","sessions":[{"id":"a","created_at":10}]}`+"\n", string(body), "the last page has no cursor")

	body, err = worker.ListAnswer([]byte(`{"trees":[],"more":false}`))
	require.NoError(t, err)
	assert.Equal(t, `{"next_cursor":"","sessions":[]}`+"\n", string(body), "an empty list is [], not null")

	_, err = worker.ListAnswer([]byte(`<html>`))
	assert.Error(t, err)
}

// The cursor a page ends with asks the directory for the trees after its
// last one.
func TestListCursorRoundTrip(t *testing.T) {
	body, err := worker.ListAnswer([]byte(`{"trees":[{"root_id":"z9","created_at":1700000000999}],"more":true}`))
	require.NoError(t, err)
	var page struct {
		Next string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	limit, after, err := worker.ParseListQuery(url.Values{"cursor": {page.Next}, "limit": {"1"}}, 50)
	require.NoError(t, err)
	assert.Equal(t, "/trees?after_at=1700000000999&after_id=z9&limit=1", worker.DirectoryListPath(limit, after))
}
