//go:build js && wasm

package durableobject

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core"
)

// Clock is core.Clock on Go's time, which on js/wasm reads Date.now and
// schedules with setTimeout. Date.now does not advance during synchronous
// JS (workerd's Spectre mitigation): time moves across I/O, which is all
// core's timestamps need.
type Clock struct{}

var _ core.Clock = Clock{}

func (Clock) Now() int64 { return time.Now().UnixMilli() }

func (Clock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// IDs mints random 128-bit ids, 26 lowercase base32 characters like the
// local host's (crypto/rand is crypto.getRandomValues on js/wasm).
type IDs struct{}

var _ core.IDSource = IDs{}

func (IDs) NewID() string { return strings.ToLower(rand.Text()) }

// Alarm is the tree's wake-up as the object's alarm (core.Waker). It
// remembers the alarm it set, since reading it back (getAlarm) is async
// and core arms from code that must not wait; the shim tells it the
// stored alarm at boot and that one was delivered when the alarm handler
// starts (a delivered wake-up is used up, DESIGN §4). Once the tree is
// deleted (clear) it arms nothing more: a wake-up still running when the
// delete came (an alarm handler holding for a turn the delete stopped)
// cannot bring an alarm back to the deleted object.
type Alarm struct {
	storage js.Value // ctx.storage
	// db, when set, is the DB on the same storage: the alarm calls wait
	// for its transaction to end (DB.outside), never made part of it.
	db *DB

	mu      sync.Mutex
	at      int64 // the alarm set, ms; 0: none
	cleared bool  // the tree was deleted: Arm does nothing
}

var _ core.Waker = (*Alarm)(nil)

// NewAlarm returns the waker over storage (ctx.storage) whose alarm is
// currently set at (0: none).
func NewAlarm(storage js.Value, at int64) *Alarm { return &Alarm{storage: storage, at: at} }

// Arm implements core.Waker: an alarm already set no later than at stays,
// otherwise the alarm moves to at; after clear nothing is set (a deleted
// tree has nothing to wake for). setAlarm's promise is not awaited: the
// object's output gate holds every response until the write is durable.
func (a *Alarm) Arm(_ context.Context, at int64) (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cleared || (a.at != 0 && a.at <= at) {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("durableobject: set alarm: %v", p)
		}
	}()
	a.outsideTx(func() { a.storage.Call("setAlarm", float64(at)).Call("catch", logRejection) })
	a.at = at
	return nil
}

// delivered marks the alarm used up: the handler runs, and the next Arm
// sets a new one whatever its time.
func (a *Alarm) delivered() {
	a.mu.Lock()
	a.at = 0
	a.mu.Unlock()
}

// clear deletes the alarm for good (the tree was deleted): later Arms do
// nothing. A setAlarm of an earlier Arm still in flight is ordered before
// this deleteAlarm by the storage, so it cannot outlive it.
func (a *Alarm) clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at, a.cleared = 0, true
	a.outsideTx(func() { a.storage.Call("deleteAlarm").Call("catch", logRejection) })
}

// isCleared reports whether clear ran and no restore since.
func (a *Alarm) isCleared() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cleared
}

// outsideTx makes the storage call f outside any transaction of a.db.
func (a *Alarm) outsideTx(f func()) {
	if a.db == nil {
		f()
		return
	}
	a.db.outside(f)
}

// restore undoes clear for a delete that failed, the tree still in
// storage: the alarm is set for at, and Arm works again.
func (a *Alarm) restore(at int64) {
	a.mu.Lock()
	a.cleared = false
	a.mu.Unlock()
	if err := a.Arm(context.Background(), at); err != nil {
		js.Global().Get("console").Call("error", "revenant: restore the alarm:", err.Error())
	}
}

// logRejection reports a storage promise that failed where nobody awaits
// it; the next wake-up or request retries what it was for.
var logRejection = js.FuncOf(func(_ js.Value, args []js.Value) any {
	if len(args) > 0 {
		js.Global().Get("console").Call("error", "revenant: storage promise rejected:", args[0])
	}
	return nil
})
