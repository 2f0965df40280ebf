//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// The alarm handler holds the object while the turns it resumed run,
// but only for AlarmHold: a turn longer than that (a model streaming for
// minutes) must not keep the handler, whose last act re-arms the
// wake-up, from returning. An unbounded hold leaves the used-up alarm
// unreplaced for as long as the turn runs, and a handler cut by the
// platform's own limit on an alarm (or the object's eviction) then has
// no wake-up left to resume the claim.
func TestWakeHoldIsBoundedAndRearmsWhileATurnRuns(t *testing.T) {
	store, _ := newAlarmStandIn(t, 0)
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	clock := fakehost.NewClock(1767225600000)
	host := core.Host{DB: openTreeDB(t), Clock: clock, Wake: store, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	driver := treetest.NewDriver(1)
	t.Cleanup(driver.Release)
	inst, _, err := recovery.Boot(context.Background(), host, core.NewConfig(), driver)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	ctx := context.Background()
	_, err = inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	_, err = inst.Admit(ctx, "root", core.PromptInput{Text: "hold"})
	require.NoError(t, err)
	<-driver.Started // the turn runs, and holds until released

	o := &Object{opts: Options{AlarmHold: 10 * time.Millisecond}, log: quiet, alarm: store, inst: inst}
	store.delivered() // as the alarm that runs wake: its wake-up is used up
	done := make(chan error, 1)
	go func() {
		_, err := o.wake(nil)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // a bound on a failure, far past the 10 ms hold
		t.Fatal("the alarm handler still holds the object 30 s into a 10 ms hold: its hold is unbounded")
	}
	assert.False(t, inst.Idle(), "the turn still runs: the handler returned at its hold's bound")
	assert.NotZero(t, store.at, "the handler re-armed the wake-up for the claim the running turn holds")
}
