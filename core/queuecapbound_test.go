package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A Go program that sets the queue cap itself meets the bound the hosts'
// queue_cap setting has: Open refuses a cap past MaxQueueCap, as it
// refuses one that is not positive, and opens with the cap at the bound.
func TestOpenRefusesAQueueCapPastTheBound(t *testing.T) {
	tr := treetest.New(t)
	host, _, _ := tr.Host()
	d := treetest.NewDriver(1)
	for _, n := range []int{core.MaxQueueCap + 1, 0, -1} {
		_, err := core.Open(ctx, host, core.NewConfig().WithQueueCap(n), d)
		require.Error(t, err, "queue cap %d", n)
		assert.Contains(t, err.Error(), "queue cap", n)
	}
	inst, err := core.Open(ctx, host, core.NewConfig().WithQueueCap(core.MaxQueueCap), d)
	require.NoError(t, err, "a cap at the bound")
	assert.Equal(t, core.MaxQueueCap, inst.Config().QueueCap())
	require.NoError(t, inst.Close(ctx))
}
