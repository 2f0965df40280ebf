package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/storage"
)

// A request whose instance stopped under it is 404 only when the tree's
// next instance says the tree is gone: a tree the host could not read
// (its storage full or failing, its next instance not booted) keeps the
// 503, whose retry finds it, and is never answered "not found" (seed 2494
// under -diskfull was suspected of that; it was a request the delete had
// overtaken, answered once the tree was gone).
func TestAStoppedInstanceWhoseTreeCannotBeReadStays503(t *testing.T) {
	r, err := httpmsg.NewRequest(context.Background(), "POST", "/v1/sessions/t/prompt", nil)
	require.NoError(t, err)
	stopped := fmt.Errorf("admit: %w", core.ErrClosed)
	for name, unreadable := range map[string]error{
		"full":   &storage.Error{Code: storage.CodeFull, Msg: "database or disk is full"},
		"closed": fmt.Errorf("read session t: %w", storage.ErrClosed),
		"spent":  fmt.Errorf("%w: busy", core.ErrStorageUnavailable),
	} {
		tree := &Tree{RootID: "t", Next: func(context.Context) (*core.Instance, error) { return nil, unreadable }}
		got := deletedUnder(r, tree, stopped)
		assert.Same(t, stopped, got, name)
		assert.Equal(t, ErrUnavailable, ErrorOf(got).Type, name)
	}
}
