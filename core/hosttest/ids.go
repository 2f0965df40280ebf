package hosttest

import (
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
)

// NewIDs returns the id source under test, fresh for each test.
type NewIDs func(t conform.T) core.IDSource

// RunIDs runs the id suite on t.
func RunIDs(t *testing.T, newIDs NewIDs) { RunIDsT(conform.Wrap(t), newIDs) }

// RunIDsT is RunIDs on any conform.T.
func RunIDsT(t conform.T, newIDs NewIDs) {
	runCases(t, newIDs, []testCase[core.IDSource]{
		{"ids are unique and fit a URL path segment", idsUnique},
		{"ids are unique across goroutines", idsUniqueConcurrently},
	})
}

func idsUnique(t conform.T, ids core.IDSource) {
	seen := map[string]bool{}
	for range 10_000 {
		id := ids.NewID()
		if id == "" || seen[id] || url.PathEscape(id) != id {
			assert.Fail(t, "bad id", "id %q: empty, repeated after %d ids, or not a path segment as it stands", id, len(seen))
			return
		}
		seen[id] = true
	}
}

func idsUniqueConcurrently(t conform.T, ids core.IDSource) {
	const goroutines, each = 8, 1_000
	var wg sync.WaitGroup
	got := make([][]string, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				got[g] = append(got[g], ids.NewID())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range got {
		for _, id := range list {
			seen[id] = true
		}
	}
	assert.Len(t, seen, goroutines*each, "repeated ids")
}
