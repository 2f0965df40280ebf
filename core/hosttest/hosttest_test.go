package hosttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/hosttest"
)

// Each suite, run against an implementation broken in one way, fails
// exactly the test about that way.

// stopless is a virtual clock whose stop says it stopped a timer that
// still fires.
type stopless struct{ *fakehost.Clock }

func (c stopless) AfterFunc(d time.Duration, f func()) func() bool {
	c.Clock.AfterFunc(d, f)
	return func() bool { return true }
}

func TestClockSuiteCatchesStopThatDoesNotStop(t *testing.T) {
	r := conform.Record("clock", func(ct conform.T) {
		hosttest.RunClockT(ct, func(conform.T) core.Clock { return stopless{fakehost.NewClock(1_700_000_000_000)} })
	})
	assert.Equal(t, []string{
		"clock/a timer fires once, no earlier than its delay",
		"clock/a stopped timer never fires",
	}, r.Failures())
}

// latestWaker keeps the latest time armed instead of the earliest.
type latestWaker struct{ fakehost.Waker }

func (w *latestWaker) Arm(ctx context.Context, at int64) error {
	if at > w.At() {
		w.Take()
	}
	return w.Waker.Arm(ctx, at)
}

func TestWakerSuiteCatchesLatestWins(t *testing.T) {
	r := conform.Record("waker", func(ct conform.T) {
		hosttest.RunWakerT(ct, func(conform.T) hosttest.ObservableWaker { return &latestWaker{} })
	})
	assert.Equal(t, []string{"waker/an earlier Arm moves it, a later one leaves it"}, r.Failures())
}

func TestIDSuiteCatchesRepeats(t *testing.T) {
	r := conform.Record("ids", func(ct conform.T) {
		hosttest.RunIDsT(ct, func(conform.T) core.IDSource { return constantIDs{} })
	})
	assert.Equal(t, []string{
		"ids/ids are unique and fit a URL path segment",
		"ids/ids are unique across goroutines",
	}, r.Failures())
}

type constantIDs struct{}

func (constantIDs) NewID() string { return "same" }
