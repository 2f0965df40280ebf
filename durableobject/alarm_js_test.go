//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Alarm's rules, on a stand-in for ctx.storage that records the
// alarm calls (setAlarm, deleteAlarm) in order. Run under Node like the
// package's other js/wasm tests.

// newAlarmStandIn is an Alarm whose stored alarm is at (0: none) over a
// stand-in storage, and the storage's alarm calls so far: "set <ms>" and
// "delete", in order.
func newAlarmStandIn(t *testing.T, at int64) (*Alarm, func() []string) {
	t.Helper()
	storage := jsFunc(nil, `
		const calls = [];
		return { calls,
			setAlarm(at) { calls.push("set " + at); return Promise.resolve(); },
			deleteAlarm() { calls.push("delete"); return Promise.resolve(); } };`).Invoke()
	return NewAlarm(storage, at), func() []string { return recordedCalls(storage) }
}

// recordedCalls is a stand-in storage's calls so far (its JS array
// "calls"), in order.
func recordedCalls(storage js.Value) []string {
	arr := storage.Get("calls")
	out := []string{}
	for i := range arr.Length() {
		out = append(out, arr.Index(i).String())
	}
	return out
}

func arm(t *testing.T, a *Alarm, at int64) {
	t.Helper()
	require.NoError(t, a.Arm(context.Background(), at))
}

// An alarm already set no later than the one asked for stays: core arms
// from every claim, and a later time must not push an earlier wake-up back.
func TestAlarmArmKeepsAnEarlierAlarm(t *testing.T) {
	a, calls := newAlarmStandIn(t, 0)
	arm(t, a, 5000)
	arm(t, a, 9000)
	arm(t, a, 5000)
	assert.Equal(t, []string{"set 5000"}, calls(), "one setAlarm: the later and equal times keep it")
}

// An earlier time moves the alarm.
func TestAlarmArmMovesALaterAlarm(t *testing.T) {
	a, calls := newAlarmStandIn(t, 0)
	arm(t, a, 9000)
	arm(t, a, 5000)
	assert.Equal(t, []string{"set 9000", "set 5000"}, calls())
}

// The alarm the shim read at boot counts as set: a later time keeps it.
func TestAlarmArmKeepsTheStoredAlarm(t *testing.T) {
	a, calls := newAlarmStandIn(t, 5000)
	arm(t, a, 9000)
	assert.Empty(t, calls(), "the stored alarm stays")
	arm(t, a, 1000)
	assert.Equal(t, []string{"set 1000"}, calls())
}

// A delivered alarm is used up: the next Arm sets a new one whatever its
// time, even a later one than the delivered alarm's. Without this the
// handler's re-arm would be skipped and the resume lost.
func TestAlarmDeliveredForgetsTheAlarm(t *testing.T) {
	a, calls := newAlarmStandIn(t, 0)
	arm(t, a, 5000)
	a.delivered()
	arm(t, a, 9000)
	assert.Equal(t, []string{"set 5000", "set 9000"}, calls())
}

// After the tree's delete (clear) the alarm is deleted and no later Arm
// sets one: a wake-up still running when the delete came (an alarm
// handler holding for a turn, a failed sweep's retry) cannot bring an
// alarm back to the deleted object. Arm reports no error: there is
// nothing left to wake for.
func TestAlarmClearRefusesLaterArms(t *testing.T) {
	a, calls := newAlarmStandIn(t, 0)
	arm(t, a, 5000)
	a.clear()
	arm(t, a, 9000)
	arm(t, a, 1000)
	a.delivered() // an alarm handler that started before the delete
	arm(t, a, 1000)
	assert.Equal(t, []string{"set 5000", "delete"}, calls())
}

// A delete that failed after clear restores the alarm: it is set at
// once (the stopped turns' claims need their wake-up), and Arm works
// again afterwards.
func TestAlarmRestoreAfterAFailedDelete(t *testing.T) {
	a, calls := newAlarmStandIn(t, 0)
	arm(t, a, 5000)
	a.clear()
	a.restore(7000)
	arm(t, a, 6000)
	arm(t, a, 8000)
	assert.Equal(t, []string{"set 5000", "delete", "set 7000", "set 6000"}, calls())
}

// sweepObject is an Object with only what swept needs: the Alarm over a
// stand-in storage and a quiet log.
func sweepObject(t *testing.T) (*Object, func() []string) {
	t.Helper()
	a, calls := newAlarmStandIn(t, 0)
	return &Object{alarm: a, log: logs.New(logs.NewTextHandler(io.Discard, nil))}, calls
}

// A failed wake counts once on the wake schedule (1 s doubling), even
// when its sweep and its last re-arm both failed: counted twice, the
// delay grew 4x per alarm.
func TestWakeFailureCountsOnce(t *testing.T) {
	o, calls := sweepObject(t)
	sweepErr, rearmErr := errors.New("sweep: disk I/O"), errors.New("rearm: disk I/O")
	for wake, delay := range []int64{1000, 2000, 4000} { // ms: 1 s, doubling
		o.alarm.delivered()
		before := time.Now().UnixMilli()
		o.swept("alarm", sweepErr)
		o.rearmFailed(sweepErr, rearmErr)
		after := time.Now().UnixMilli()
		assert.Equal(t, wake+1, o.sweepFailures, "wake %d", wake+1)
		set := calls()
		require.Len(t, set, wake+1)
		at, err := strconv.ParseInt(strings.TrimPrefix(set[wake], "set "), 10, 64)
		require.NoError(t, err, set[wake])
		assert.True(t, before+delay <= at && at <= after+delay, "wake %d armed %d ms after it, want %d", wake+1, at-before, delay)
	}
	assert.Len(t, calls(), 3, "one retry alarm per wake")
	o.alarm.delivered()
	o.swept("alarm", nil)
	o.rearmFailed(nil, rearmErr) // the sweep worked, the re-arm did not: this wake's one failure
	assert.Equal(t, 1, o.sweepFailures)
	assert.Len(t, calls(), 4, "the failed re-arm arms a retry")
}

// A deleted tree's sweeps fail (its tables are gone) and have nothing to
// retry: swept arms nothing, even before the Alarm was cleared.
func TestSweptArmsNothingOnceDeleted(t *testing.T) {
	o, calls := sweepObject(t)
	o.deleted = true
	o.swept("alarm", errors.New("rearm: no such table: claims"))
	o.rearmFailed(nil, errors.New("rearm: no such table: claims"))
	assert.Empty(t, calls())
	assert.Zero(t, o.sweepFailures)
}

// An alarm whose handler panicked used its wake-up up without re-arming:
// the object gives itself up (bridge.giveUp), so the shim aborts it and
// workerd retries the alarm on a fresh object. Left running, the object
// would hold the tree's claims with no wake-up until a client called.
func TestAlarmPanicGivesTheObjectUp(t *testing.T) {
	o, _ := sweepObject(t)
	o.bridge = jsObject.New()
	o.inst = &core.Instance{} // not opened: the sweep panics
	_, err := o.alarmEvent(nil)
	require.ErrorIs(t, err, errPanic)
	assert.Equal(t, "the alarm handler panicked", o.bridge.Get("giveUp").String())
}
