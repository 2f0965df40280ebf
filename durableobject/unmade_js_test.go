//go:build js && wasm

package durableobject

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/recovery"
)

// answer is a response as a handler wrote it.
type answer struct {
	header httpmsg.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() httpmsg.Header { return a.header }
func (a *answer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}
func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(httpmsg.StatusOK)
	return a.body.Write(b)
}

// A tree whose root session was never created (a create cut short) is
// deleted by the front's clean-up DELETE, which reads 404 as "gone"
// (worker/entry.mjs discard). When that deleteAll fails, rejecting or
// throwing, the tree is still stored: the answer is 503, as for any
// failed delete, never the 404 of a tree not there (which a delete that
// worked answers).
func TestUnmadeTreeWhoseDeleteFailsIsUnavailable(t *testing.T) {
	for name, how := range map[string]int32{"deleted": 0, "rejects": failDeleteReject, "throws": failDeleteThrow} {
		t.Run(name, func(t *testing.T) {
			o, storage := openedObject(t)
			bridge := o.bridge

			o.failNextDelete.Store(how)
			r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodDelete, "https://object/v1/sessions/root", nil)
			require.NoError(t, err)
			r.Header.Set(TreeHeader, "root")
			r.Header.Set(PrincipalHeader, "tester")
			w := &answer{header: httpmsg.Header{}}
			o.ServeHTTP(w, r)
			if how == 0 {
				assert.Equal(t, httpmsg.StatusNotFound, w.status, "deleted: as any tree not there")
				assert.Contains(t, recordedCalls(storage), "deleteAll")
				return
			}
			assert.Equal(t, httpmsg.StatusServiceUnavailable, w.status, "%s", w.body.String())
			var body struct {
				Error struct{ Type string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(w.body.Bytes(), &body), "one error, answered once: %s", w.body.String())
			assert.Equal(t, "unavailable", body.Error.Type)
			calls := recordedCalls(storage)
			assert.NotContains(t, calls, "deleteAll", "the storage is still there")
			require.NotEmpty(t, calls)
			assert.Equal(t, "set", calls[len(calls)-1], "the alarm the delete cleared is set again: %v", calls)
			assert.False(t, o.alarm.isCleared())
			assert.Equal(t, "the tree's storage could not be deleted", bridge.Get("giveUp").String(), "a fresh object serves the tree next")
		})
	}
}

// openedObject is the object of tree "root", opened on a new database,
// over a storage stub that records its calls (recordedCalls) and whose
// promises all resolve. Its tree runs no turn.
func openedObject(t *testing.T) (*Object, js.Value) {
	return openedObjectWith(t, treeDriverNever{})
}

// openedObjectWith is openedObject whose turns driver runs, with the
// default configuration's waits (setWaits).
func openedObjectWith(t *testing.T, driver core.Driver) (*Object, js.Value) {
	storage := jsFunc(nil, `
		const calls = [];
		return { calls,
			setAlarm(at) { calls.push("set"); return Promise.resolve(); },
			deleteAlarm() { calls.push("delete"); return Promise.resolve(); },
			deleteAll() { calls.push("deleteAll"); return Promise.resolve(); } };`).Invoke()
	bridge := jsFunc(nil, `return {};`).Invoke()
	bridge.Set("storage", storage)
	db := openTreeDB(t)
	quiet := logs.New(logs.NewTextHandler(io.Discard, nil))
	alarm := NewAlarm(storage, 0)
	host := core.Host{DB: db, Clock: fakehost.NewClock(1767225600000), Wake: alarm, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	inst, _, err := recovery.Boot(context.Background(), host, core.NewConfig(), driver)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	o := &Object{bridge: bridge, log: quiet, alarm: alarm, db: &DB{}, treeID: "root"}
	o.setWaits(core.NewConfig())
	require.NoError(t, o.opened(inst))
	return o, storage
}

// serveFront serves o the front's create (POST) or delete (DELETE) of
// tree "root" for principal "tester".
func serveFront(t *testing.T, o *Object, method string) *answer {
	w := &answer{header: httpmsg.Header{}}
	o.ServeHTTP(w, frontRequest(t, method))
	return w
}

// frontRequest is the front's create (POST) or delete (DELETE) of tree
// "root" for principal "tester".
func frontRequest(t *testing.T, method string) *httpmsg.Request {
	path := map[string]string{httpmsg.MethodPost: "/v1/sessions", httpmsg.MethodDelete: "/v1/sessions/root"}[method]
	r, err := httpmsg.NewRequest(context.Background(), method, "https://object"+path, nil)
	require.NoError(t, err)
	r.Header.Set(TreeHeader, "root")
	r.Header.Set(PrincipalHeader, "tester")
	return r
}

// treeDriverNever is a driver for a tree that never runs a turn.
type treeDriverNever struct{}

func (treeDriverNever) Run(context.Context, *core.Execution) core.Outcome {
	return core.Outcome{Kind: core.Succeeded}
}

// A route's panic that core/api answers 500 gives the object up, as a
// panic the shim recovers does: a delete cut by one after it cleared the
// alarm has the alarm set again, so the stopped turns keep a wake-up and a
// fresh object serves the tree as storage has it.
func TestRoutePanicGivesTheObjectUp(t *testing.T) {
	o, storage := openedObject(t)
	bridge, alarm := o.bridge, o.alarm
	serve := func(method string) *answer { return serveFront(t, o, method) }
	require.Equal(t, httpmsg.StatusCreated, serve(httpmsg.MethodPost).status)
	require.False(t, bridge.Get("giveUp").Truthy())

	o.failNextDelete.Store(failDeletePanic)
	w := serve(httpmsg.MethodDelete)
	assert.Equal(t, httpmsg.StatusInternalServerError, w.status, "%s", w.body.String())
	assert.Equal(t, "a request's handler panicked (DELETE /v1/sessions/{id})", bridge.Get("giveUp").String())
	calls := recordedCalls(storage)
	assert.NotContains(t, calls, "deleteAll")
	require.NotEmpty(t, calls)
	assert.Equal(t, "set", calls[len(calls)-1], "the alarm the delete cleared is set again: %v", calls)
	assert.False(t, alarm.isCleared())
}

// unmade deletes a tree only when its root session is known never to have
// been created (api.ErrTreeNotFound). A DELETE of the root that reaches an
// object whose storage cannot read the root session (a transient failure)
// leaves the tree alone: the delete's own owner check answers it (503), and
// the client's retry finds the tree as it was. Deleted there, a tree whose
// owner was never checked would be gone.
func TestUnmadeLeavesATreeWhoseRootCannotBeRead(t *testing.T) {
	store, calls, flaky, inst, quiet := bootOnFlakyStorage(t)
	ctx := context.Background()
	_, err := inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	o := &Object{treeID: "root", log: quiet, alarm: store, inst: inst}

	flaky.fail.Store(true)
	r, err := httpmsg.NewRequest(ctx, httpmsg.MethodDelete, "https://object/v1/sessions/root", nil)
	require.NoError(t, err)
	var deleting any
	var answered bool
	func() {
		defer func() { deleting = recover() }() // this Object has no handler or storage to delete
		answered = o.unmade(ctx, &answer{header: httpmsg.Header{}}, r)
	}()
	assert.Nil(t, deleting, "unmade went on to delete the tree")
	assert.False(t, answered, "the delete's own owner check answers it")
	assert.False(t, o.isDeleted())
	assert.False(t, inst.Closed(), "the tree's instance was closed")
	assert.Empty(t, calls(), "the tree's alarm was touched")
}

// A tree's delete clears its alarm before it deletes the storage (and
// for good: later arms do nothing), so no alarm set before the delete
// fires on the emptied object, and none is set after it.
func TestDeleteClearsTheAlarmForGood(t *testing.T) {
	o, storage := openedObject(t)
	for _, method := range []string{httpmsg.MethodPost, httpmsg.MethodDelete} {
		w := serveFront(t, o, method)
		require.Less(t, w.status, 300, "%s: %s", method, w.body.String())
	}
	calls := recordedCalls(storage)
	require.Contains(t, calls, "deleteAll")
	i := slices.Index(calls, "deleteAll")
	assert.Equal(t, "delete", calls[i-1], "the alarm is deleted just before the storage: %v", calls)
	require.NoError(t, o.alarm.Arm(context.Background(), 1))
	assert.Equal(t, calls, recordedCalls(storage), "an arm after the delete sets nothing")
	// Deleted, the tree is not there: deleting it again is 404 and touches
	// no storage (unmade leaves a deleted tree alone).
	assert.Equal(t, httpmsg.StatusNotFound, serveFront(t, o, httpmsg.MethodDelete).status)
	assert.Equal(t, calls, recordedCalls(storage), "a second delete touches no storage")
}

// A panic in a tree route (not only a directory route) that core/api
// answers 500 gives the object up too: what the panic cut short is as
// unknown there. Here the route finds no instance to serve. The shim is
// told as it happens (bridge.gaveUp), not only by the answer: a panic in
// an event stream already answered leaves no answer to look at.
func TestTreeRoutePanicGivesTheObjectUp(t *testing.T) {
	o, _ := openedObject(t)
	var told []string
	tell := js.FuncOf(func(_ js.Value, args []js.Value) any {
		told = append(told, args[0].String())
		return nil
	})
	defer tell.Release()
	o.bridge.Set("gaveUp", tell)
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status)
	o.ownerSeen = "tester" // the owner check passes without the instance
	o.inst = nil           // the route panics on it
	r, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://object/v1/sessions/root", nil)
	require.NoError(t, err)
	r.Header.Set(TreeHeader, "root")
	r.Header.Set(PrincipalHeader, "tester")
	w := &answer{header: httpmsg.Header{}}
	o.ServeHTTP(w, r)
	assert.Equal(t, httpmsg.StatusInternalServerError, w.status, "%s", w.body.String())
	assert.Equal(t, "a request's handler panicked (GET /v1/sessions/{id})", o.bridge.Get("giveUp").String())
	assert.Equal(t, []string{"a request's handler panicked (GET /v1/sessions/{id})"}, told, "the shim told once, as it happened")
}

// A panic that escapes every handler (here ServeHTTP's own, on routes it
// does not have) is recovered by fetch, answered 500, and gives the object
// up: what the panic cut short is unknown, so a fresh object must serve
// the tree next. Before this test only the workerd e2e test
// (TestWorkerdEvictAndPanic/panic) saw a fetch whose panic did not give
// the object up.
func TestRequestPanicGivesTheObjectUp(t *testing.T) {
	o, _ := openedObject(t)
	o.routes = nil // ServeHTTP panics on it, outside core/api's recover
	headers := js.Global().Get("JSON").Call("parse", `[["x-revenant-tree","root"],["x-revenant-principal","tester"]]`)
	v, err := o.fetch([]js.Value{js.ValueOf("GET"), js.ValueOf("https://object/v1/sessions/root"), headers, js.Undefined()})
	require.NoError(t, err)
	resp := v.(js.Value)
	assert.Equal(t, httpmsg.StatusInternalServerError, resp.Get("status").Int())
	assert.Equal(t, "a request panicked", o.bridge.Get("giveUp").String(), "the object was given up")
}

// The alarm a route's panic sets again is on the wake schedule: its first
// delay from now (retry.Wake), as a failed sweep's retry is. An absolute
// time that forgot now would be an alarm in 1970, which fires at once on
// every fresh object instead of a second later.
func TestRoutePanicSetsTheAlarmOneWakeDelayAhead(t *testing.T) {
	o, _ := openedObject(t)
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status)
	o.failNextDelete.Store(failDeletePanic)
	before := o.clock.Now()
	require.Equal(t, httpmsg.StatusInternalServerError, serveFront(t, o, httpmsg.MethodDelete).status)
	after := o.clock.Now()
	o.alarm.mu.Lock()
	at := o.alarm.at
	o.alarm.mu.Unlock()
	delay := retry.Wake().Delay(0).Milliseconds()
	assert.GreaterOrEqual(t, at, before+delay, "the alarm is set one wake delay after the panic")
	assert.LessOrEqual(t, at, after+delay, "the alarm is set one wake delay after the panic")
}
