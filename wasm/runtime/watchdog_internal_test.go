package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A call that returns past its watchdog fails though the guest reached no
// import after the deadline (docs/abi.md: a call past it is a trap).
func TestOverran(t *testing.T) {
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	require.NoError(t, overran(live, nil))

	past, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	require.ErrorIs(t, overran(past, nil), ErrWatchdog)

	trap := errors.New("trap")
	require.Equal(t, trap, overran(past, trap), "the call's own error comes first")

	cancelled, cancel3 := context.WithCancel(context.Background())
	cancel3()
	require.NoError(t, overran(cancelled, nil), "a cancelled caller is not a watchdog")
}
