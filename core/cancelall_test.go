package core_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
)

// Every interrupt binds CancelAll as a SQL argument. The Durable Object
// binds integers as JS numbers and refuses one a float64 would round, so
// a cutoff like math.MaxInt64 would fail every interrupt there while
// passing on SQLite. It must also lie above every seq a session can reach
// (the API caps cursors at 2^53-1).
func TestCancelAllBindsOnEveryHost(t *testing.T) {
	var c int64 = core.CancelAll
	f := float64(c)
	require.Less(t, f, float64(1<<63), "a float64 this large converts back to no int64")
	require.Equal(t, c, int64(f), "a float64 must hold the cutoff exactly")
	require.Greater(t, c, int64(1<<53-1), "the cutoff must be above every seq")
}
