package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/revenantrt/revenant/core/api"
)

// DirectoryListPath is the caller's Directory request (worker/directory.mjs,
// GET /trees) for a page of limit trees after cursor after (nil: the first
// page).
func DirectoryListPath(limit int, after *api.ListCursor) string {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != nil {
		q.Set("after_at", strconv.FormatInt(after.CreatedAt, 10))
		q.Set("after_id", after.ID)
	}
	return "/trees?" + q.Encode()
}

// directoryPage is the Directory object's answer to GET /trees.
type directoryPage struct {
	Trees []struct {
		RootID    string `json:"root_id"`
		CreatedAt int64  `json:"created_at"`
	} `json:"trees"`
	More bool `json:"more"`
}

// ListAnswer turns the Directory's page (its GET /trees body) into the
// body of GET /v1/sessions' 200, the local server's shape: the sessions,
// newest first, and the cursor of the next page ("" on the last one).
func ListAnswer(directory []byte) ([]byte, error) {
	var page directoryPage
	if err := json.Unmarshal(directory, &page); err != nil {
		return nil, fmt.Errorf("read directory page: %w", err)
	}
	items := make([]api.SessionItem, 0, len(page.Trees))
	for _, t := range page.Trees {
		items = append(items, api.SessionItem{ID: t.RootID, CreatedAt: t.CreatedAt})
	}
	next := ""
	if page.More && len(items) > 0 {
		last := items[len(items)-1]
		next = api.ListCursor{CreatedAt: last.CreatedAt, ID: last.ID}.Encode()
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(map[string]any{"sessions": items, "next_cursor": next}); err != nil {
		return nil, fmt.Errorf("encode session list: %w", err)
	}
	return b.Bytes(), nil
}
