package host_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

// fakeRuntime is a host.GuestRuntime without wazero: it records what the
// host asks of it, so the host's side of the contract is tested alone.
type fakeRuntime struct {
	mu     sync.Mutex
	trees  map[string]*fakeTree
	arms   map[string]func(at int64) error
	closes int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{trees: map[string]*fakeTree{}, arms: map[string]func(int64) error{}}
}

func (r *fakeRuntime) StartTree(_ context.Context, id string, _ *sqlitedb.Conn, arm func(at int64) error, _ *slog.Logger) (host.GuestTree, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &fakeTree{}
	r.trees[id], r.arms[id] = t, arm
	return t, nil
}

func (r *fakeRuntime) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closes++
	return nil
}

func (r *fakeRuntime) tree(id string) (*fakeTree, func(at int64) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trees[id], r.arms[id]
}

func (r *fakeRuntime) closed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closes
}

// fakeTree counts the wake-ups delivered to it; it re-arms nothing unless
// onWake, run as a wake's last act, does.
type fakeTree struct {
	mu     sync.Mutex
	wakes  int
	closed bool
	onWake func()
}

// setOnWake sets what the tree's wakes run as their last act (nil:
// nothing), under its lock: a wake may be running.
func (t *fakeTree) setOnWake(f func()) {
	t.mu.Lock()
	t.onWake = f
	t.mu.Unlock()
}

func (t *fakeTree) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNotImplemented)
}

func (t *fakeTree) Wake(context.Context) error {
	t.mu.Lock()
	t.wakes++
	f := t.onWake
	t.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

func (t *fakeTree) Idle(context.Context) (bool, error) { return true, nil }

func (t *fakeTree) Close(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	return nil
}

func (t *fakeTree) counts() (wakes int, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wakes, t.closed
}

// guestTreeWithClaim leaves tree t1 a claim on a host opened with cfg (its
// turn held), then opens the host again over cfg with a fake guest
// runtime: Open boots t1 as a guest, which delivers the row. It returns
// that host, t1's fake tree and the arm the host gave it.
func (e *env) guestTreeWithClaim(t *testing.T, cfg host.Config) (*host.Host, *fakeTree, func(at int64) error) {
	t.Helper()
	h := e.open(cfg)
	admit(t, e.tree(h, "t1"), "t1", "hold")
	e.d.next(t)
	require.Contains(t, e.wakeups(), "t1", "the claim armed the wake-up")
	require.NoError(t, h.Close(ctx)) // claims and the wake-up row stay

	rt := newFakeRuntime()
	cfg.Driver, cfg.Guest = nil, rt
	h = e.open(cfg)
	require.Equal(t, "t1", e.nextDelivery().id, "Open booted the tree: the row was delivered")
	tree, arm := rt.tree("t1")
	require.NotNil(t, tree, "booted as a guest")
	return h, tree, arm
}

// The host owns a guest runtime it is given: an Open that fails closes it,
// and so does Close.
func TestHostClosesItsGuestRuntime(t *testing.T) {
	rt := newFakeRuntime()
	_, err := host.Open(ctx, host.Config{Guest: rt}) // no data directory
	require.Error(t, err)
	assert.Equal(t, 1, rt.closed(), "a failed Open closes it")

	rt = newFakeRuntime()
	e := newEnv(t)
	cfg := e.config()
	cfg.Driver, cfg.Guest = nil, rt
	h := e.open(cfg)
	require.NoError(t, h.Close(ctx))
	assert.Equal(t, 1, rt.closed())
}

// The host is the one owner of a guest tree's wake-up: the guest's arm is
// stored in the index and the host delivers it, once, with GuestTree.Wake
// (the runtime delivers none). Boot at Open is a delivery too.
func TestHostDeliversGuestWakeUps(t *testing.T) {
	e := newEnv(t)
	h, tree, arm := e.guestTreeWithClaim(t, e.config())
	assert.Empty(t, e.wakeups(), "nothing re-armed during the boot: the row is used up")

	at := e.clock.Now() + 1000
	require.NoError(t, arm(at))
	assert.Equal(t, map[string]int64{"t1": at}, e.wakeups(), "stored before the arm returns")
	e.clock.Advance(time.Second)
	d := e.nextDelivery()
	require.Equal(t, "t1", d.id)
	require.NoError(t, d.err)
	wakes, _ := tree.counts()
	assert.Equal(t, 1, wakes, "delivered once, by the host")
	assert.Empty(t, e.wakeups(), "used up")

	require.NoError(t, h.Close(ctx))
	_, closed := tree.counts()
	assert.True(t, closed)
}

// An arm earlier than the tree's wake-up moves it earlier, row and timer:
// the wake is delivered at the earlier time, not the later one. An earlier
// arm that storage refuses is still fired by this process at its time
// (the stored row keeps the later one, for a restart).
func TestGuestWakeArmEarlierIsDeliveredEarlier(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-wake-earlier")
	h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), "host-wake-earlier"))

	later := e.clock.Now() + time.Hour.Milliseconds()
	require.NoError(t, arm(later))
	require.NoError(t, arm(e.clock.Now()+1000))
	assert.Equal(t, map[string]int64{"t1": e.clock.Now() + 1000}, e.wakeups())
	e.clock.Advance(time.Second)
	d := e.nextDelivery()
	require.Equal(t, "t1", d.id)
	require.NoError(t, d.err)
	wakes, _ := tree.counts()
	assert.Equal(t, 1, wakes, "delivered at the earlier time")

	later = e.clock.Now() + time.Hour.Milliseconds()
	require.NoError(t, arm(later))
	fault.FailFor(time.Hour, faultvfs.Full)
	require.Error(t, arm(e.clock.Now()+1000))
	assert.Equal(t, map[string]int64{"t1": later}, e.wakeups(), "the row keeps the later time")
	e.clock.Advance(time.Second)
	d = e.nextDelivery()
	require.Equal(t, "t1", d.id, "the refused earlier arm still fired here")
	wakes, _ = tree.counts()
	assert.Equal(t, 2, wakes)
	fault.Heal()
	require.NoError(t, h.Close(ctx))
}

// A guest's wake_arm that the host cannot store is an error the guest
// hears, not a trap; and a wake handler whose re-arm (its last act) was
// refused, although its call succeeded, is a failed delivery: the
// used-up row stays and the host retries the delivery from memory, as in
// process (DESIGN §4 rule 2).
func TestGuestWakeArmRefusedByStorage(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-wake-arm")
	h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), "host-wake-arm"))
	at := e.clock.Now() + 1000
	require.NoError(t, arm(at))

	fault.FailFor(time.Hour, faultvfs.Full)
	err := arm(at - 500)
	require.Error(t, err, "an arm storage refused is reported")
	assert.True(t, storage.IsTransient(err), "as the storage failure it is: %v", err)
	assert.Equal(t, map[string]int64{"t1": at}, e.wakeups(), "the stored row is unchanged")

	tree.setOnWake(func() { _ = arm(e.clock.Now() + 1000) })
	e.clock.Advance(time.Second)
	d := e.nextDelivery()
	require.Equal(t, "t1", d.id)
	require.Error(t, d.err, "the handler's refused re-arm fails the delivery")
	assert.Equal(t, map[string]int64{"t1": at}, e.wakeups(), "the used-up row stays for a crash")

	fault.Heal()
	e.clock.Advance(time.Second) // the wake schedule's first delay
	d = e.nextDelivery()
	require.NoError(t, d.err, "retried from memory, a second later")
	assert.Contains(t, e.wakeups(), "t1", "re-armed by the handler")
	wakes, _ := tree.counts()
	assert.GreaterOrEqual(t, wakes, 2)
	require.NoError(t, h.Close(ctx))
}

// A guest that arms the wake-up of a tree deleted under it (a request
// racing the DELETE) is told its storage is closed, as its SQL imports are
// on the deleted tree's closed connection: wake_arm_checked answers
// "database closed", not SQLITE_ERROR, and the guest's request ends 503,
// not 500 (wasm/runtime TestPromptWhoseWakeArmFindsStorageClosed). Nothing
// is stored for the gone tree.
func TestGuestWakeArmOfADeletedTree(t *testing.T) {
	e := newEnv(t)
	h, _, arm := e.guestTreeWithClaim(t, e.config())
	require.NoError(t, h.Delete(ctx, "t1"))

	err := arm(e.clock.Now() + 1000)
	require.ErrorIs(t, err, storage.ErrClosed)
	assert.ErrorIs(t, err, api.ErrTreeNotFound)
	assert.Empty(t, e.wakeups(), "nothing stored for the gone tree")
	require.NoError(t, h.Close(ctx))
}
