package e2e

import (
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdRefusedCreateLeavesNoStorage: a create the tree's object
// refuses (here a model outside allowed_models, which only the object
// knows: the front checks the body's form alone), or cannot serve (its
// configuration is invalid), creates nothing, on Cloudflare as on the
// local server. The front records no directory row for it and the client
// gets no id, so a tree (or a tree id) left in the object's storage could
// never be listed, read or deleted: the object must leave its storage
// empty. Read after a SIGKILL, with SQLite itself.
func TestWorkerdRefusedCreateLeavesNoStorage(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", `REVENANT_TOOLS:{"allowed_models":["model-ok"]}`)
	s := w.client(t)
	kept := s.create()
	for _, model := range []string{"model-not-allowed", "another-one"} {
		var out struct {
			Error struct{ Type string } `json:"error"`
		}
		s.do(http.MethodPost, "/v1/sessions", map[string]any{"config": map[string]any{"model": model}}, http.StatusBadRequest, &out)
		assert.Equal(t, "invalid_request", out.Error.Type)
	}
	assert.Equal(t, []string{kept}, s.listed())
	w.kill(t)
	assert.Equal(t, 1, w.treesStored(t), "one tree holds anything: the one created")

	w.vars = []string{"REVENANT_TOOLS:" + readmeTools} // its secret unset: every object's boot fails
	w.start(t)
	for i := range 2 {
		code, body := frontRaw(t, s, http.MethodPost, "/v1/sessions")
		assert.Equal(t, http.StatusInternalServerError, code, "create %d: %s", i, body)
	}
	w.kill(t)
	assert.Equal(t, 1, w.treesStored(t), "a create on a misconfigured Worker stores nothing either")
}

// treesStored counts the Tree objects whose SQLite database holds any of
// revenant's tables (a fresh object's file may hold local dev's own
// __miniflare_do_name alone). Read with wrangler stopped.
func (w *workerd) treesStored(t *testing.T) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sqlite") || !strings.Contains(filepath.Dir(path), "Tree") || filepath.Base(path) == "metadata.sqlite" {
			return err
		}
		tables := slices.DeleteFunc(tablesOf(t, path), func(name string) bool { return name == "__miniflare_do_name" })
		t.Logf("%s: %v", filepath.Base(path), tables)
		if len(tables) > 0 {
			n++
		}
		return nil
	})
	require.NoError(t, err)
	return n
}

// TestWorkerdLostCreateAnswer: a create's object is reset with the
// create's answer lost (the test build's REVENANT_TEST_LOSE_CREATE aborts
// it, its storage made durable first), before the create's handler ran
// (the tree stored by its boot, no root session) or after the create's
// commit. The front answers 503 and records no directory row, and the
// client never learns the id, so a tree left in storage could never be
// listed, read or deleted: the front deletes it, and the object deletes
// a tree with no root session too. Read after a SIGKILL, with SQLite
// itself.
func TestWorkerdLostCreateAnswer(t *testing.T) {
	t.Parallel() // see workerd_test.go
	for _, at := range []string{"before", "after"} {
		t.Run(at, func(t *testing.T) {
			w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_CREATE:"+at)
			s := w.client(t)
			code, body := frontRaw(t, s, http.MethodPost, "/v1/sessions")
			assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
			w.waitLog(t, `msg="test: aborting the object during its create"`, waitTimeout)
			assert.Empty(t, s.listed())
			w.kill(t)
			assert.Equal(t, 0, w.treesStored(t), "no tree is left in storage")
		})
	}
}

// TestWorkerdLostDirectoryAnswer: the caller's Directory commits a new
// tree's row and its answer is lost (the test build's
// REVENANT_TEST_LOSE_PUT resets it once the row is durable, as a reset
// or a lost connection would). The create succeeded all the same: the
// front, before it would undo it, asks the Directory, finds the row and
// answers 201. Undone, the list would show a session whose routes all
// answer 404 unless the row's delete succeeded too.
func TestWorkerdLostDirectoryAnswer(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:on")
	s := w.client(t)
	id := s.create()
	w.waitLog(t, "revenant test: the directory's answer to a PUT lost", waitTimeout)
	w.waitLog(t, "recording failed, but its row is there", waitTimeout)
	assert.Equal(t, []string{id}, s.listed(), "the session is listed")
	assert.Equal(t, http.StatusOK, frontStatus(t, s, http.MethodGet, "/v1/sessions/"+id), "and readable")
	w.kill(t)
	assert.Equal(t, 1, w.treesStored(t), "one tree is stored: the listed one")
}

// TestWorkerdFailedRowDelete: a delete whose tree the object deleted but
// whose directory row could not be deleted (the test build's
// REVENANT_TEST_FAIL_ROW_DELETE fails each row's first DELETE, as a
// storage error would) is answered 503, not 204: the row is still listed,
// and a client told 204 would never delete again. Deleting again finds
// the tree gone (the object answers 404), deletes the row and answers
// 204: the delete is then complete.
func TestWorkerdFailedRowDelete(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_ROW_DELETE:on")
	s := w.client(t)
	sid := s.create()
	code, body := frontRaw(t, s, http.MethodDelete, "/v1/sessions/"+sid)
	assert.Equal(t, http.StatusServiceUnavailable, code, "the row was not deleted: %s", body)
	w.waitLog(t, "revenant test: the directory failed a request: DELETE "+sid, waitTimeout)
	assert.Contains(t, s.listed(), sid, "the row is still listed")
	assert.Equal(t, http.StatusNotFound, frontStatus(t, s, http.MethodGet, "/v1/sessions/"+sid), "the tree itself is gone")

	assert.Equal(t, http.StatusNoContent, frontStatus(t, s, http.MethodDelete, "/v1/sessions/"+sid), "deleting again completes the delete")
	assert.NotContains(t, s.listed(), sid, "the row is gone")
}

// TestWorkerdFailedOwnerRead: the owner check of a request whose
// Directory did not answer (the test build's REVENANT_TEST_FAIL_OWNER_READ
// fails each tree's first owner read, 500, as a storage error would) is
// answered 503, the request never reaching the tree's object: the front
// cannot tell whose tree it is (a front that took the failure for "owned"
// would leave only the object's own check). The next request is served. The owner
// cache is off, so that every request asks the Directory.
func TestWorkerdFailedOwnerRead(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_OWNER_READ:on", "REVENANT_OWNER_CACHE:off")
	s := w.client(t)
	sid := s.create()
	code, body := frontRaw(t, s, http.MethodGet, "/v1/sessions/"+sid)
	assert.Equal(t, http.StatusServiceUnavailable, code, "the owner check failed: %s", body)
	assert.Contains(t, body, "the session directory did not answer")
	w.waitLog(t, "revenant test: the directory failed a request: GET "+sid, waitTimeout)
	assert.Equal(t, http.StatusOK, frontStatus(t, s, http.MethodGet, "/v1/sessions/"+sid), "the next request is served")
}

// TestWorkerdFailedList: a list whose Directory failed to read its rows
// (the test build's REVENANT_TEST_FAIL_LIST makes the first list throw,
// as its sql.exec would on a storage error, so that the front's fetch of
// the Directory rejects) is answered at once with the API's JSON error, a
// 503 naming the directory (not the session's object, which a list never
// reaches), never a 200 with part of a page. The next list is served.
func TestWorkerdFailedList(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_LIST:on")
	s := w.client(t)
	sid := s.create()
	code, header, body := frontAnswer(t, s, http.MethodGet, "/v1/sessions")
	assert.Equal(t, http.StatusServiceUnavailable, code, "the list failed: %s", body)
	assert.Equal(t, "application/json", header.Get("Content-Type"))
	assert.JSONEq(t, `{"error":{"type":"unavailable","message":"the session directory did not answer; try again"}}`, body)
	w.waitLog(t, "revenant test: the directory failed a request: LIST", waitTimeout)
	assert.Equal(t, []string{sid}, s.listed(), "the next list is served")
}
