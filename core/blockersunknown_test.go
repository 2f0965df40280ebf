package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Listing the blockers of a session the tree does not hold is ErrNotFound
// (a 404 on …/questions and …/permissions), not an empty list: a client
// with a mistyped id must not read "nothing is waiting".
func TestBlockersOfAnUnknownSessionAreNotFound(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	root := n.NewSession("root")
	_, err := n.Inst.Blockers(context.Background(), root, "")
	assert.NoError(t, err)
	for _, id := range []string{"nope", root + ".1"} {
		_, err := n.Inst.Blockers(context.Background(), id, "")
		assert.ErrorIs(t, err, core.ErrNotFound, id)
	}
}
