//go:build js && wasm

package durableobject

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The alarm that runs the handler is used up before the sweep arms
// anything: the handler forgets it first (Alarm.delivered), so the
// sweep's arms are set though they come later than it. Here the sweep
// and the last re-arm fail (storage refuses every transaction) and the
// sweep's retry alarm is the only one: kept from the fired alarm's time,
// it would be skipped as covered by an alarm that no longer exists, and
// the tree left with none. TestWakeWhoseStorageFailsArmsItsRetry forgets
// the alarm itself before each wake, so it does not see this.
func TestWakeForgetsTheFiredAlarmBeforeItsSweepArms(t *testing.T) {
	store, calls, flaky, inst, quiet := bootOnFlakyStorage(t)
	o := &Object{opts: Options{AlarmHold: time.Minute}, log: quiet, alarm: store, inst: inst}
	store.mu.Lock()
	store.at = time.Now().UnixMilli() - 1 // the alarm that fires now
	store.mu.Unlock()

	flaky.fail.Store(true)
	n := len(calls())
	before := time.Now().UnixMilli()
	_, err := o.wake(nil)
	after := time.Now().UnixMilli()
	require.NoError(t, err)
	set := calls()[n:]
	require.Len(t, set, 1, "the sweep's retry alarm is set")
	at, err := strconv.ParseInt(strings.TrimPrefix(set[0], "set "), 10, 64)
	require.NoError(t, err, set[0])
	assert.True(t, before+1000 <= at && at <= after+1000, "armed %d ms after the wake, want 1000", at-before)
}
