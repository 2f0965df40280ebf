//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"syscall/js"
	"testing"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// txStorageStandIn is a stand-in for ctx.storage with both a transaction
// and an alarm, as workerd has them: a setAlarm or deleteAlarm made while
// a transactionSync callback's frame is open belongs to that transaction
// and is undone when it rolls back (probed on workerd 2026-04-26:
// transactionSync(() => { setAlarm(t); throw … }) leaves getAlarm() null).
// inTx counts the alarm and deleteAll calls made inside a transaction.
var txStorageStandIn = jsFunc(nil, `
	const s = { alarm: null, open: 0, inTx: 0,
		setAlarm(at) { if (s.open) s.inTx++; s.alarm = at; return Promise.resolve(); },
		deleteAlarm() { if (s.open) s.inTx++; s.alarm = null; return Promise.resolve(); },
		deleteAll() { if (s.open) s.inTx++; s.deleted = true; return Promise.resolve(); },
		transactionSync(fn) {
			const saved = s.alarm;
			s.open++;
			try { fn(); } catch (e) { s.alarm = saved; throw e; } finally { s.open--; }
		} };
	return s;`)

// Go on js/wasm runs every other runnable goroutine before it hands a
// call from JS back (runtime.handleEvent): after a transaction's callback
// returns and before transactionSync commits or rolls back. A goroutine
// that arms the wake-up then (one woken by the same event as the
// transaction's: a claim lock let go, a commit published, two retry
// timers due together) must not have its alarm made part of that
// transaction: a rollback would undo it while the Alarm remembers it set,
// and later arms at a later time would keep the missing one (DESIGN §4:
// a claim without a wake-up).
func TestAlarmArmedDuringAnotherTransactionSurvivesItsRollback(t *testing.T) {
	s := txStorageStandIn.Invoke()
	db := NewDB(fakeSQL(t, `{}`), helpers(t, s))
	a := NewAlarm(s, 0)
	a.db = db // as boot sets it

	start := make(chan struct{})
	armed := make(chan error, 1)
	go func() {
		<-start
		armed <- a.Arm(context.Background(), 5000)
	}()
	errRefused := errors.New("nothing to write")
	close(start) // the arming goroutine is runnable from here on
	err := db.Tx(context.Background(), func(storage.Tx) error { return errRefused })
	require.ErrorIs(t, err, errRefused)
	require.NoError(t, <-armed)
	assert.Zero(t, s.Get("inTx").Int(), "an alarm call was made inside another goroutine's transaction")
	assert.Equal(t, 5000, alarmAt(s), "the alarm Arm reported set is set")
}

// A delete's deleteAll is made outside any transaction, for the same
// reason as an alarm call: made while another goroutine's transaction is
// open (after its callback returned, before it commits or rolls back), it
// would belong to that transaction, and its rollback would bring back the
// storage of a tree the delete reported deleted.
func TestDeleteAllMadeDuringAnotherTransactionStaysOutOfIt(t *testing.T) {
	s := txStorageStandIn.Invoke()
	db := NewDB(fakeSQL(t, `{}`), helpers(t, s))
	bridge := jsObject.New()
	bridge.Set("storage", s)
	o := &Object{bridge: bridge, db: db}
	start := make(chan struct{})
	deleted := make(chan error, 1)
	go func() {
		<-start
		deleted <- o.deleteStorage()
	}()
	errRefused := errors.New("nothing to write")
	close(start) // the deleting goroutine is runnable from here on
	err := db.Tx(context.Background(), func(storage.Tx) error { return errRefused })
	require.ErrorIs(t, err, errRefused)
	require.NoError(t, <-deleted)
	assert.Zero(t, s.Get("inTx").Int(), "deleteAll was made inside another goroutine's transaction")
	assert.True(t, s.Get("deleted").Truthy())
}

func alarmAt(s js.Value) int {
	if v := s.Get("alarm"); v.Type() == js.TypeNumber {
		return v.Int()
	}
	return 0
}
