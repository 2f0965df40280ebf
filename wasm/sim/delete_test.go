package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// A small campaign whose every tree is deleted by its client, under kills
// and full disks: each delete commits, the run before it keeps every
// invariant on the copy taken just before its commit, and the tree stays
// gone: every request sent after the commit is answered 404.
func TestDeletedTreesStayGone(t *testing.T) {
	wasm := guestbuild.Must(t)
	dir := t.TempDir()
	cfg := sim.Config{Seed: 3, Sessions: 8, Kills: 80, Zombies: 0.5, DiskFull: 0.5, Deletes: 1, Dir: dir, Keep: true, CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	var out bytes.Buffer
	res.Print(&out)
	t.Log("\n" + out.String())
	assert.Empty(t, res.Violations)
	assert.Contains(t, out.String(), "deleted trees 8 ")
	var after, bootsAfterAnswer int
	for _, s := range res.Sessions {
		d := s.Ledger.Delete
		require.NotNil(t, d, "session %d was not deleted", s.Index)
		assert.True(t, d.Committed, "session %d: its delete never committed", s.Index)
		assert.Positive(t, s.Check.Events, "session %d: the copy before its delete holds its log", s.Index)
		for _, r := range d.Requests {
			// Every request sent after the commit is judged as such, the
			// ones sent before the client saw its DELETE answered too.
			if r.At > d.CommitAt {
				assert.True(t, r.AfterCommit, "session %d: %s sent at %d, after the commit at %d, is not judged as after it", s.Index, r.Route, r.At, d.CommitAt)
			}
			if r.AfterCommit && r.Status != 0 { // 0: its guest died first, and it went again
				after++
				assert.Equal(t, http.StatusNotFound, r.Status, "session %d: %s", s.Index, r.Route)
			}
		}
		// Boots after the DELETE's answer (the host stopped the deleted
		// tree's guest, and a later request booted a fresh one) are
		// recorded and judged like any after the commit.
		for _, b := range d.Boots {
			if b.Boot > d.Attempts[len(d.Attempts)-1].Boot {
				bootsAfterAnswer++
			}
		}
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("tree%04d.before.db", s.Index)))
		assert.NoError(t, err, "the copy before the delete is kept")
	}
	assert.Positive(t, after, "requests sent after a delete committed")
	assert.Positive(t, bootsAfterAnswer, "boots after a DELETE was answered")

	// The kept trees are judged alike.
	for _, s := range res.Sessions {
		path := filepath.Join(dir, fmt.Sprintf("tree%04d.db", s.Index))
		r, err := check.DeletedTree(path, strings.TrimSuffix(path, ".db")+".before.db", &s.Ledger, check.Options{Label: path})
		require.NoError(t, err)
		assert.Empty(t, r.Violations)
	}
}

// A share of deletes of 0 draws nothing: the campaign's history is the
// one it was before deletes existed.
func TestNoDeletesChangeNoHistory(t *testing.T) {
	wasm := guestbuild.Must(t)
	run := func(deletes float64) *sim.Result {
		res, err := sim.Run(context.Background(), sim.Config{Seed: 5, Sessions: 3, Kills: 30, Deletes: deletes, CacheDir: cacheDir(t)}, wasm)
		require.NoError(t, err)
		return res
	}
	none, some := run(0), run(1)
	for _, s := range none.Sessions {
		assert.Nil(t, s.Ledger.Delete)
	}
	assert.NotEqual(t, none.Hash, some.Hash, "deletes change the history")
	var out bytes.Buffer
	none.Print(&out)
	assert.NotContains(t, out.String(), "deleted trees")
}
