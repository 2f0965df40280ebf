package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/host"
)

// A Close called while another closes the host waits for it: its return
// means what the first one's does (every instance and database closed). It
// used to return nil at once, while the first still closed trees: a caller
// that then removed the data directory, say, pulled it from under them.
// Its ctx bounds the wait.
func TestCloseWhileAnotherClosesWaitsForIt(t *testing.T) {
	e := newEnv(t)
	closing, release := make(chan struct{}), make(chan struct{})
	h := e.open(host.WithClosingHook(e.config(), func(string) {
		close(closing)
		<-release
	}))
	e.tree(h, "a")

	first := make(chan error, 1)
	go func() { first <- h.Close(ctx) }()
	<-closing // the first Close is closing tree a

	gone, cancel := context.WithCancel(ctx)
	cancel()
	err := h.Close(gone)
	require.Error(t, err, "a second Close returned while the first was still closing the trees")
	assert.ErrorIs(t, err, context.Canceled)

	close(release)
	require.NoError(t, <-first)
	assert.NoError(t, h.Close(ctx), "a Close after the first finished returns at once")
}
