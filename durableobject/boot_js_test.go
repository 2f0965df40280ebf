//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// The object's boot (Object.boot, what the shim calls inside
// blockConcurrencyWhile with the alarm it read from storage) over a tree
// whose turn sleeps on a provider retry: DESIGN §4 rule 3, the boot
// re-arms from durable state, and the Alarm it makes counts the stored
// alarm as set (Arm keeps an earlier one).

// retryLater is how far ahead laterRetryDriver's turns retry.
const retryLater = 10 * time.Minute

// laterRetryDriver answers every turn "retry in retryLater" (a provider's
// 429 with a long Retry-After) on the real clock, the object's, and keeps
// the last retry's time.
type laterRetryDriver struct{ last atomic.Int64 }

func (d *laterRetryDriver) Run(context.Context, *core.Execution) core.Outcome {
	at := time.Now().UnixMilli() + retryLater.Milliseconds()
	d.last.Store(at)
	return core.Outcome{Kind: core.RetryLater, RetryAt: at, Attempt: 1, Message: "429 Too Many Requests"}
}

// sleepingTree is a tree database whose root "root" holds a claim
// sleeping on a retry due about retryLater from now, left by an instance
// gone (an evicted object's), and that retry's time.
func sleepingTree(t *testing.T) (*sqlitedb.DB, int64) {
	t.Helper()
	db := openTreeDB(t)
	store, _ := newAlarmStandIn(t, 0)
	driver := &laterRetryDriver{}
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	host := core.Host{DB: db, Clock: Clock{}, Wake: store, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	ctx := context.Background()
	first, _, err := recovery.Boot(ctx, host, core.NewConfig(), driver)
	require.NoError(t, err)
	_, err = first.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	_, err = first.Admit(ctx, "root", core.PromptInput{Text: "hello"})
	require.NoError(t, err)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, first.WaitIdle(wait))
	first.Abandon()
	retryAt := driver.last.Load()
	require.NotZero(t, retryAt, "the turn ran and sleeps on its retry")
	return db, retryAt
}

// alarmTime is the time of a stand-in storage's "set <ms>" call.
func alarmTime(t *testing.T, call string) int64 {
	t.Helper()
	require.True(t, strings.HasPrefix(call, "set "), call)
	at, err := strconv.ParseInt(strings.TrimPrefix(call, "set "), 10, 64)
	require.NoError(t, err, call)
	return at
}

// bootObject boots tree "root" of db through Object.boot as the shim
// does, the stored alarm being stored (null: none), over a stand-in
// storage whose alarm calls are recorded (recordedCalls).
func bootObject(t *testing.T, db *sqlitedb.DB, stored js.Value) (*Object, func() []string) {
	t.Helper()
	storage := jsFunc(nil, `
		const calls = [];
		return { calls,
			setAlarm(at) { calls.push("set " + at); return Promise.resolve(); },
			deleteAlarm() { calls.push("delete"); return Promise.resolve(); } };`).Invoke()
	bridge := jsFunc(nil, `return { sqlQuery: {} };`).Invoke()
	bridge.Set("storage", storage)
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	setup := func(core.Clock) (core.Config, core.Driver, error) {
		return core.NewConfig(), &laterRetryDriver{}, nil
	}
	o := &Object{opts: Options{Setup: setup}, bridge: bridge, log: quiet, treeDB: db}
	_, err := o.boot([]js.Value{js.ValueOf("root"), stored})
	require.NoError(t, err)
	require.NotNil(t, o.inst)
	t.Cleanup(o.inst.Abandon)
	return o, func() []string { return recordedCalls(storage) }
}

// An alarm already stored earlier than the boot's re-arm (a failed
// sweep's retry, an earlier provider retry) stays: the boot counts it as
// set. A boot that ignored it moved it later, and the wake-up it was for
// came late by the difference.
func TestBootKeepsAnEarlierStoredAlarm(t *testing.T) {
	db, _ := sleepingTree(t)
	stored := time.Now().UnixMilli() + 1000
	o, calls := bootObject(t, db, js.ValueOf(float64(stored)))
	assert.Empty(t, calls(), "the stored alarm stays where it is")
	assert.Equal(t, stored, o.alarm.at)
}

// With no alarm stored (a wake-up used up, then the object evicted), the
// boot arms one for the sleeping claim, no later than its retry. A boot
// that never re-armed left the claim without a wake-up until a client
// called.
func TestBootArmsForAClaimWithNoStoredAlarm(t *testing.T) {
	db, retryAt := sleepingTree(t)
	before := time.Now().UnixMilli()
	o, calls := bootObject(t, db, js.Null())
	set := calls()
	require.Len(t, set, 1, "one alarm set")
	at := alarmTime(t, set[0])
	assert.True(t, before < at && at <= retryAt, "armed %d ms ahead, the retry is %d ms ahead", at-before, retryAt-before)
	assert.Equal(t, at, o.alarm.at)
}

// A stored alarm later than the claim's wake-up moves earlier.
func TestBootMovesALaterStoredAlarmEarlier(t *testing.T) {
	db, retryAt := sleepingTree(t)
	stored := retryAt + time.Hour.Milliseconds()
	o, calls := bootObject(t, db, js.ValueOf(float64(stored)))
	set := calls()
	require.Len(t, set, 1, "the alarm moved once")
	at := alarmTime(t, set[0])
	assert.LessOrEqual(t, at, retryAt)
	assert.Equal(t, at, o.alarm.at)
}
