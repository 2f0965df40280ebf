//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// The alarm handler's last act on a real instance (a SQLite file opened
// by sqlitedb, which runs under Node too) and an Alarm over a stand-in
// storage whose setAlarm can be made to throw once.

// lockFreeVFS is the OS VFS with file locks that always succeed: SQLite's
// OS VFS has none on js/wasm (every lock fails), nor the shared memory
// WAL's index needs. One connection in exclusive locking mode needs
// neither: SQLite then keeps the index in the connection's own memory.
const lockFreeVFS = "revenant-test-lockfree"

func init() { vfs.Register(lockFreeVFS, lockFree{vfs.Find("os").(vfs.VFSFilename)}) }

type lockFree struct{ vfs.VFSFilename }

func (v lockFree) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, got, err := v.VFSFilename.OpenFilename(name, flags)
	if err != nil {
		return nil, got, err
	}
	return lockFreeFile{f}, got, nil
}

type lockFreeFile struct{ vfs.File }

func (lockFreeFile) Lock(vfs.LockLevel) error         { return nil }
func (lockFreeFile) Unlock(vfs.LockLevel) error       { return nil }
func (lockFreeFile) CheckReservedLock() (bool, error) { return false, nil }

// retryDriver answers every turn "retry in a second" (a provider's 429),
// and before the turn numbered failArmAt answers, makes the storage's
// next setAlarm throw: that turn's Arm(RetryAt) fails, which core only
// logs.
type retryDriver struct {
	clock     *fakehost.Clock
	storage   js.Value
	failArmAt int

	mu   sync.Mutex
	runs int
}

func (d *retryDriver) Run(_ context.Context, x *core.Execution) core.Outcome {
	d.mu.Lock()
	d.runs++
	n := d.runs
	d.mu.Unlock()
	if n == d.failArmAt {
		d.storage.Set("failNext", true)
	}
	return core.Outcome{Kind: core.RetryLater, RetryAt: d.clock.Now() + 1000, Attempt: n, Message: "429 Too Many Requests"}
}

func (d *retryDriver) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs
}

// DESIGN §4 wake rule 2: the alarm handler, as its last act, re-arms
// from durable state while any claim or pending work remains, whether or
// not a turn still runs there. Here the alarm resumes a turn sleeping on
// a provider retry; the provider answers 429 again and the turn's
// Arm(RetryAt) fails (a warning only); the object goes idle with the
// claim sleeping until the new RetryAt. Only the handler's last re-arm
// sets the wake-up for it: skipped because the object is idle, the alarm
// left is the one the sweep armed while the turn ran (a wake interval
// out), and the retry is late by most of that.
func TestWakeRearmsAnIdleObjectThatStillHoldsAClaim(t *testing.T) {
	storage := jsFunc(nil, `
		const s = { calls: [], failNext: false,
			setAlarm(at) {
				if (s.failNext) { s.failNext = false; s.calls.push("fail " + at); throw new Error("setAlarm: storage unavailable"); }
				s.calls.push("set " + at); return Promise.resolve(); },
			deleteAlarm() { s.calls.push("delete"); return Promise.resolve(); } };
		return s;`).Invoke()
	calls := func() []string { return recordedCalls(storage) }

	db := openTreeDB(t)
	clock := fakehost.NewClock(1767225600000)
	driver := &retryDriver{clock: clock, storage: storage, failArmAt: 2}
	alarm := NewAlarm(storage, 0)
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	host := core.Host{DB: db, Clock: clock, Wake: alarm, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	inst, _, err := recovery.Boot(context.Background(), host, core.NewConfig(), driver)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	o := &Object{opts: Options{AlarmHold: time.Minute}, log: quiet, alarm: alarm, inst: inst}

	ctx := context.Background()
	s, err := inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	_, err = inst.Admit(ctx, s.ID, core.PromptInput{Text: "hello"})
	require.NoError(t, err)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, inst.WaitIdle(wait))
	require.Equal(t, 1, driver.count())
	first := clock.Now() + 1000
	require.Equal(t, "set "+itoa(first), calls()[len(calls())-1], "the first retry armed its wake-up")

	// The retry's alarm fires: the handler resumes the turn, which is
	// answered 429 again and cannot arm for its next try.
	clock.Set(first)
	before := len(calls())
	_, err = o.wake(nil)
	require.NoError(t, err)
	require.Equal(t, 2, driver.count(), "the alarm resumed the sleeping turn")
	require.True(t, inst.Idle())
	second := first + 1000
	after := calls()[before:]
	require.Contains(t, after, "fail "+itoa(second), "the resumed turn's own Arm(RetryAt) failed")
	assert.Equal(t, "set "+itoa(second), after[len(after)-1],
		"the handler's last act arms the wake-up for the retry the idle object's claim sleeps on")
	assert.Equal(t, second, alarm.at)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// failingDB is a storage.DB whose transactions fail while fail is set.
type failingDB struct {
	storage.DB
	fail atomic.Bool
}

func (d *failingDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	if d.fail.Load() {
		return errors.New("disk I/O error")
	}
	return d.DB.Tx(ctx, fn)
}

// An alarm whose sweep and last re-arm both fail (storage refuses every
// transaction) has used its wake-up up and could not tell whether work
// remains: the handler itself arms the retry on the wake schedule, 1 s
// then doubling, counted once per wake. Without it the tree is left with
// no alarm at all until a client calls.
func TestWakeWhoseStorageFailsArmsItsRetry(t *testing.T) {
	store, calls, flaky, inst, quiet := bootOnFlakyStorage(t)
	o := &Object{opts: Options{AlarmHold: time.Minute}, log: quiet, alarm: store, inst: inst}

	flaky.fail.Store(true)
	for wake, delay := range []int64{1000, 2000} { // ms
		n := len(calls())
		store.delivered() // as the alarm that runs wake
		before := time.Now().UnixMilli()
		_, err := o.wake(nil)
		after := time.Now().UnixMilli()
		require.NoError(t, err)
		set := calls()[n:]
		require.Len(t, set, 1, "wake %d: its one retry alarm", wake+1)
		at, err := strconv.ParseInt(strings.TrimPrefix(set[0], "set "), 10, 64)
		require.NoError(t, err, set[0])
		assert.True(t, before+delay <= at && at <= after+delay, "wake %d armed %d ms after it, want %d", wake+1, at-before, delay)
		assert.Equal(t, wake+1, o.sweepFailures, "wake %d counts once", wake+1)
	}
}

// openTreeDB opens a new tree database in the test's directory, closed
// when the test ends.
func openTreeDB(t *testing.T) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open("file:"+filepath.Join(t.TempDir(), "tree.db")+"?vfs="+lockFreeVFS+"&_pragma=locking_mode(exclusive)", sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// bootOnFlakyStorage boots a tree over storage the test can make refuse
// every transaction (flaky.fail), its wake-up an alarm stand-in whose
// calls are recorded.
func bootOnFlakyStorage(t *testing.T) (store *Alarm, calls func() []string, flaky *failingDB, inst *core.Instance, quiet *logs.Logger) {
	t.Helper()
	store, calls = newAlarmStandIn(t, 0)
	flaky = &failingDB{DB: openTreeDB(t)}
	clock := fakehost.NewClock(1767225600000)
	quiet = logs.New(logs.NewTextHandler(io.Discard, nil))
	host := core.Host{DB: flaky, Clock: clock, Wake: store, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	inst, _, err := recovery.Boot(context.Background(), host, core.NewConfig(), &retryDriver{clock: clock})
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	return store, calls, flaky, inst, quiet
}

// writeRefusingDB is a storage.DB whose writes fail (a full disk) while
// refuse is set; reads still work, so a sweep fails and the wake
// handler's re-arm, a read, succeeds.
type writeRefusingDB struct {
	storage.DB
	refuse atomic.Bool
}

func (d *writeRefusingDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return d.DB.Tx(ctx, func(tx storage.Tx) error { return fn(writeRefusingTx{tx, d}) })
}

type writeRefusingTx struct {
	storage.Tx
	d *writeRefusingDB
}

func (t writeRefusingTx) Exec(query string, args ...any) (int64, error) {
	if t.d.refuse.Load() {
		return 0, &storage.Error{Code: 13, Msg: "database or disk is full"}
	}
	return t.Tx.Exec(query, args...)
}

// During a storage outage the alarm comes on the wake schedule, 1 s
// doubling, not every wake interval: with the claims still readable, the
// handler's last re-arm (core's Rearm) waits out the same backoff as the
// failed sweep's retry alarm (swept). Before, it armed one interval ahead
// and, the earlier alarm being kept, the backoff never took effect.
func TestFailingSweepsAlarmOnTheWakeSchedule(t *testing.T) {
	db := &writeRefusingDB{DB: openTreeDB(t)}
	store, _ := newAlarmStandIn(t, 0)
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	cfg := core.NewConfig().WithWakeInterval(time.Second) // the Worker's
	host := core.Host{DB: db, Clock: Clock{}, Wake: store, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	driver := treetest.NewDriver(1)
	first, _, err := recovery.Boot(context.Background(), host, cfg, driver)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = first.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	_, err = first.Admit(ctx, "root", core.PromptInput{Text: "hold"})
	require.NoError(t, err)
	<-driver.Started
	first.Abandon() // evicted mid-turn: the claim stays

	db.refuse.Store(true)
	inst, _, bootErr := recovery.Boot(ctx, host, cfg, driver)
	require.ErrorIs(t, bootErr, core.ErrReadOnly)
	t.Cleanup(inst.Abandon)
	o := &Object{opts: Options{AlarmHold: time.Minute}, log: quiet, alarm: store, inst: inst}
	o.swept("boot", bootErr) // as boot does
	for wake := 1; wake <= 3; wake++ {
		store.delivered() // as the alarm that runs wake
		delay := retry.Wake().Delay(wake).Milliseconds()
		before := time.Now().UnixMilli()
		_, err := o.wake(nil)
		after := time.Now().UnixMilli()
		require.NoError(t, err)
		at := store.at
		assert.True(t, before+delay <= at && at <= after+delay, "wake %d: the alarm is %d ms after it, want %d", wake, at-before, delay)
	}
}
