package e2e

import (
	"crypto/sha256"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncruces/go-sqlite3"
)

// TestWorkerdStaleOwnerCache is the case the front's owner cache
// (worker/entry.mjs) relies on: a front isolate that still remembers a
// deleted tree as its caller's (another isolate deleted it) forwards the
// caller's requests to the tree's object, and the object answers 404 with
// nothing written and no tree booted, whether it is still in memory or a
// fresh object on the deleted storage. REVENANT_OWNER_CACHE=stale makes
// this one isolate keep the pair across the delete.
func TestWorkerdStaleOwnerCache(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TOKENS:"+frontTokens, "REVENANT_OWNER_CACHE:stale")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wrangler:\n%s", w.logs)
		}
	})
	alice := w.as(t, "a-token")
	sid := alice.create()
	alice.snapshot(sid) // the pair is cached (create cached it already)
	alice.do("DELETE", "/v1/sessions/"+sid, nil, http.StatusNoContent, nil)
	before := w.treeState(t)

	routes := []struct{ method, path string }{
		{"GET", "/v1/sessions/" + sid},
		{"POST", "/v1/sessions/" + sid + "/prompt"},
		{"GET", "/v1/sessions/" + sid + "/events"},
		{"POST", "/v1/sessions/" + sid + "/interrupt"},
	}
	stale := func(what string) {
		t.Helper()
		for _, rq := range routes {
			// GETs go without a body: wrangler dev's middleware cannot drain
			// an unread one after the answer, and the connection then hangs.
			code := 0
			if rq.method == "GET" {
				code, _ = frontRaw(t, alice, rq.method, rq.path)
			} else {
				code = frontStatus(t, alice, rq.method, rq.path)
			}
			assert.Equal(t, http.StatusNotFound, code, "%s: %s %s", what, rq.method, rq.path)
		}
	}
	stale("the deleted object in memory")
	assert.Equal(t, before, w.treeState(t), "the object in memory wrote nothing")
	// Evict it (a test-only route the stale pair still reaches): the next
	// requests meet a fresh object on the deleted storage.
	frontStatus(t, alice, "POST", "/v1/sessions/"+sid+"/test/abort")
	// Only a pair the delete left in the cache gets there: without it the
	// directory answers 404 and nothing reaches the object.
	w.waitLog(t, "test route: aborting the object", 10*time.Second)
	stale("a fresh object on the deleted storage")
	assert.Equal(t, 1, strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid), "the tree booted once, at its creation")
	assert.NotContains(t, alice.listed(), sid)

	// The fresh object's start leaves a page of local dev's own in the
	// WAL (miniflare records an object's name in its database): the
	// deleted tree's database holds that table and nothing of revenant's.
	w.kill(t)
	for path := range w.treeState(t) {
		if strings.HasSuffix(path, ".sqlite") && filepath.Base(path) != "metadata.sqlite" {
			assert.Subset(t, []string{"__miniflare_do_name"}, tablesOf(t, path), "the deleted tree's database holds none of revenant's tables")
		}
	}
}

// tablesOf lists the tables and indexes of the SQLite file at path, read
// with SQLite itself (read-only), not with revenant's storage code: e2e is
// black-box.
func tablesOf(t *testing.T, path string) []string {
	t.Helper()
	conn, err := sqlite3.OpenFlags(path, sqlite3.OPEN_READONLY)
	require.NoError(t, err)
	defer conn.Close()
	stmt, _, err := conn.Prepare(`SELECT name FROM sqlite_master`)
	require.NoError(t, err)
	defer stmt.Close()
	var names []string
	for stmt.Step() {
		names = append(names, stmt.ColumnText(0))
	}
	require.NoError(t, stmt.Err())
	return names
}

// treeState hashes every file of the Tree namespace under the state
// directory, by path.
func (w *workerd) treeState(t *testing.T) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(filepath.Dir(path), "Tree") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = sha256.Sum256(b)
		return nil
	})
	require.NoError(t, err)
	return out
}
