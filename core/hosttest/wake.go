package hosttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
)

// ObservableWaker is a core.Waker the suite can look into: the armed time
// and its delivery, which on a host is its scheduler's business.
type ObservableWaker interface {
	core.Waker
	// At is the armed time (ms), 0 when none is armed.
	At() int64
	// Take delivers the wake-up, using it up, and reports whether one was
	// armed.
	Take() bool
}

// NewWaker returns the waker under test, fresh (nothing armed) for each
// test.
type NewWaker func(t conform.T) ObservableWaker

// RunWaker runs the wake-up suite on t.
func RunWaker(t *testing.T, newWaker NewWaker) { RunWakerT(conform.Wrap(t), newWaker) }

// RunWakerT is RunWaker on any conform.T.
func RunWakerT(t conform.T, newWaker NewWaker) {
	runCases(t, newWaker, []testCase[ObservableWaker]{
		{"Arm sets the wake-up", armSets},
		{"an earlier Arm moves it, a later one leaves it", earliestWins},
		{"a delivery uses it up", deliveryUsesUp},
	})
}

var bg = context.Background()

func armSets(t conform.T, w ObservableWaker) {
	assert.Zero(t, w.At(), "a fresh waker has nothing armed")
	assert.False(t, w.Take(), "nothing to deliver")
	require.NoError(t, w.Arm(bg, 1_000))
	assert.Equal(t, int64(1_000), w.At())
	require.NoError(t, w.Arm(bg, 1_000))
	assert.Equal(t, int64(1_000), w.At(), "arming the same time again changes nothing")
}

func earliestWins(t conform.T, w ObservableWaker) {
	require.NoError(t, w.Arm(bg, 1_000))
	require.NoError(t, w.Arm(bg, 500))
	assert.Equal(t, int64(500), w.At(), "an earlier time moves the wake-up")
	require.NoError(t, w.Arm(bg, 800))
	assert.Equal(t, int64(500), w.At(), "a later time leaves the earlier wake-up")
}

func deliveryUsesUp(t conform.T, w ObservableWaker) {
	require.NoError(t, w.Arm(bg, 500))
	assert.True(t, w.Take())
	assert.Zero(t, w.At(), "a delivered wake-up is used up")
	assert.False(t, w.Take(), "it is delivered once")
	require.NoError(t, w.Arm(bg, 2_000))
	assert.Equal(t, int64(2_000), w.At(), "an Arm after a delivery sets its own time, not the used-up one")
}
