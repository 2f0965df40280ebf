package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
)

// Instance serves one tree's database for the life of one boot. A new
// instance over the same database takes a new epoch, which fences every
// write the old one might still attempt.
type Instance struct {
	host   Host
	cfg    Config
	driver Driver
	log    *logs.Logger
	// epoch is the epoch this instance took, or 0 while it has none: it
	// booted read-only because storage refused the boot's write, and takes
	// one before its first write (ensureEpoch, under epochMu).
	epoch   atomic.Int64
	epochMu sync.Mutex
	// bootEpoch is the tree's epoch as this instance found it at boot when
	// storage refused its own: ensureEpoch takes the next one only if the
	// tree still has it, so an instance booted since is never fenced by
	// this older one.
	bootEpoch int64
	// owner marks the epochs this instance takes (takeEpoch).
	owner string
	// reopened is set while a Reopen of this closed instance runs, and
	// stays set once one returned the instance that replaces it: an epoch
	// marked as its reopen's is then that instance's, not this one's
	// (CheckEpoch), from the moment its take commits, before Reopen
	// returns it. One its caller closed at once (recovery.ReopenWith's
	// opened failed) replaces it all the same: that one is the instance to
	// fence and reopen next. A Reopen that returned no instance clears it.
	reopened atomic.Bool
	// stopping is closed when the instance starts to stop (Close, Abandon):
	// it ends every wait for storage at once.
	stopping chan struct{}
	// sweepFailures counts the sweeps in a row that failed (Swept): while
	// it is not 0, Rearm arms no earlier than the wake schedule allows.
	sweepFailures atomic.Int64

	// claimMu is the tree's claim lock (DESIGN §4, §6.4): held from arming
	// the wake-up to committing a new claim, while starting an execution,
	// while deciding and committing an interrupt, while a wake handler
	// re-arms, and while recovery applies a decision. Never held across a
	// model request or a tool body.
	claimMu sync.Mutex

	mu      sync.Mutex // guards the fields below; never held inside a transaction
	running map[string]*Execution
	subs    map[string]map[*Subscription]struct{}
	idle    chan struct{} // closed while no execution runs
	closed  bool
	// stopCause is why the instance stopped (ErrShutdown or errAbandoned);
	// an execution registered afterwards is cancelled with the same cause,
	// so an abandoned instance never records a shutdown.
	stopCause error
	// stopped is set once Close has finished: later writes are refused with
	// ErrClosed (the host may be closing the database under them), and
	// callers find the tree's next instance.
	stopped bool
	// readOnly is the storage failure that made the instance read-only (the
	// boot's epoch refused, or a settlement window spent), nil while
	// writable. Each write is then tried once, without waiting; the first
	// that succeeds clears it.
	readOnly error
	// owed are turns whose failed{type:"storage"} could not be written
	// within the settlement window: the sweep writes it, instead of resuming
	// them, once storage takes writes again. In memory only: a turn whose
	// instance dies before that is resumed like any other.
	owed map[string]owedFailure
	// hooks are the test hooks set on the instance (testhooks.go): none
	// outside core's tests.
	hooks testHooks
}

// owedFailure is a storage failure a turn's execution could not record.
type owedFailure struct {
	executionID, promptID, message string
}

// Open migrates the database, takes a new epoch and returns the instance. It
// does not sweep: recovery.Boot does that before serving.
func Open(ctx context.Context, host Host, cfg Config, driver Driver) (*Instance, error) {
	return open(ctx, host, cfg, driver, nil, "")
}

// Reopen is Open for a tree whose previous instance, closed, stopped in
// this process (a guest's delete that closed it and then failed): it
// opens only while closed still owns the tree (CheckEpoch), checked in
// the transaction that takes the new epoch (or, when storage refuses
// that, in the one that reads the epoch a read-only instance follows),
// and fails with ErrFenced otherwise. A check in a transaction of its own
// would let an instance that booted in between be superseded by the
// reopening, which Open's unconditional epoch would fence.
//
// Every reopen of closed marks its epoch with one owner token, derived
// from closed's (reopenOwner): a reopen that failed after its epoch's
// commit was stored although reported failed (a late IOERR, then its
// read-back refused) took closed's ownership, and the reopen tried again
// must find that epoch its own, not a newer instance's. Only one reopen
// of closed runs at a time, none after one returned an instance (that
// one is the instance to reopen next), and a failed one returns no instance.
func Reopen(ctx context.Context, closed *Instance, host Host, cfg Config, driver Driver) (*Instance, error) {
	// Set before the take, not after: between the take's commit and the
	// return, a write of closed's host (a guest's delete) would pass
	// CheckEpoch over the instance that holds the epoch. The take itself
	// does not need CheckEpoch to pass an epoch marked as closed's reopen's:
	// it finds that epoch its own first (takeEpoch, open's read-back).
	// A Reopen that fails clears only the mark it set itself: an earlier
	// Reopen's instance stays closed's replacement.
	set := closed.reopened.CompareAndSwap(false, true)
	inst, err := open(ctx, host, cfg, driver, closed.CheckEpoch, reopenOwner(closed.owner))
	if inst == nil && set {
		closed.reopened.Store(false)
	}
	return inst, err
}

// reopenOwner is the owner token of every reopen of the instance whose
// token is closed: a fixed-size digest, so a chain of reopens does not
// grow it. FNV, not a cryptographic hash: tokens are random, nobody
// chooses them, and crypto/sha256 would link FIPS's whole crypto stack
// into the wasip1 guest (50 KB gzip, past TestGuestSize's ceiling).
func reopenOwner(closed string) string {
	h := fnv.New128a()
	h.Write([]byte("reopen of " + closed))
	return fmt.Sprintf("%x", h.Sum(nil))
}

// open is Open with fence, when not nil, run in the epoch's transaction
// first: its error fails the open. owner is the instance's owner token
// ("": a new one).
func open(ctx context.Context, host Host, cfg Config, driver Driver, fence func(storage.Tx) error, owner string) (*Instance, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open instance: %w", err)
	}
	if host.DB == nil || host.Clock == nil || host.Wake == nil || host.IDs == nil || driver == nil {
		return nil, errors.New("open instance: host needs DB, Clock, Wake and IDs, and a driver")
	}
	log := host.Log
	if log == nil {
		log = logs.Discard()
	}
	if err := schema.Migrate(ctx, host.DB, host.Clock.Now()); err != nil {
		return nil, fmt.Errorf("open instance: %w", err)
	}
	inst := &Instance{
		host: host, cfg: cfg, driver: driver, log: log,
		stopping: make(chan struct{}),
		running:  map[string]*Execution{},
		subs:     map[string]map[*Subscription]struct{}{},
		idle:     make(chan struct{}),
		owed:     map[string]owedFailure{},
	}
	close(inst.idle)
	inst.owner = owner
	if owner == "" {
		inst.owner = host.IDs.NewID()
	}
	// One try, no waiting: boot must work when storage is full (DESIGN §8,
	// §13). An instance whose epoch write is refused serves reads and takes
	// its epoch with its first write that storage accepts.
	if err := inst.takeEpoch(ctx, -1, fence); err != nil {
		if !storage.IsTransient(err) {
			return nil, fmt.Errorf("open instance: %w", err)
		}
		// Read back the epoch it would have followed (reads work when
		// storage is full); an instance that cannot even read cannot serve.
		// A fence that refuses here fails the open too (ErrFenced), unless
		// the epoch is marked as this instance's: its take was stored
		// although reported failed (a late IOERR), the fence passed in
		// that take's transaction, and the closed instance it checks is
		// fenced by this one's epoch, not by a newer instance's.
		rerr := host.DB.Tx(ctx, func(tx storage.Tx) error {
			var owner sql.NullString
			if _, err := storage.QueryRow(tx, `SELECT epoch, epoch_owner FROM tree`, nil, &inst.bootEpoch, &owner); err != nil {
				return err
			}
			if fence == nil || owner.Valid && owner.String == inst.owner {
				return nil
			}
			return fence(tx)
		})
		if rerr != nil {
			return nil, fmt.Errorf("open instance: %w", errors.Join(err, rerr))
		}
		inst.readOnly = err
		log.Warn("storage refused the boot's write; serving read-only", "err", err)
	}
	inst.log = log.With("epoch", inst.epoch.Load())
	return inst, nil
}

// takeEpoch takes a new epoch, fencing every older instance's writes, and
// marks it with this instance's owner token. With after >= 0 it takes one
// only if the tree's epoch is still after, and fails with ErrFenced
// otherwise: a newer instance booted. An epoch found marked with this
// instance's token is this instance's own, taken by an earlier try whose
// commit was durable although reported failed (a late IOERR): it is kept.
// fence, when not nil, runs in the same transaction unless the epoch is
// this instance's own, whose take ran it (Reopen).
func (inst *Instance) takeEpoch(ctx context.Context, after int64, fence func(storage.Tx) error) error {
	var epoch int64
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		var owner sql.NullString
		if _, err := storage.QueryRow(tx, `SELECT epoch, epoch_owner FROM tree`, nil, &epoch, &owner); err != nil {
			return err
		}
		if owner.Valid && owner.String == inst.owner {
			return nil
		}
		if fence != nil {
			if err := fence(tx); err != nil {
				return err
			}
		}
		if after >= 0 && epoch != after {
			return fmt.Errorf("a newer instance booted since this one: %w", ErrFenced)
		}
		epoch++
		_, err := tx.Exec(`UPDATE tree SET epoch = ?, epoch_owner = ?`, epoch, inst.owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("take epoch: %w", err)
	}
	inst.epoch.Store(epoch)
	return nil
}

// ensureEpoch takes the instance's epoch if it booted without one. Nothing
// runs in such an instance yet, so no write of it can hold an older epoch.
// It fails with ErrFenced if another instance took an epoch since this one
// booted: this one is superseded.
func (inst *Instance) ensureEpoch(ctx context.Context) error {
	if inst.epoch.Load() != 0 {
		return nil
	}
	inst.epochMu.Lock()
	defer inst.epochMu.Unlock()
	if inst.epoch.Load() != 0 {
		return nil
	}
	if err := inst.takeEpoch(context.WithoutCancel(ctx), inst.bootEpoch, nil); err != nil {
		return err
	}
	inst.log.Info("took the epoch storage refused at boot", "epoch", inst.epoch.Load())
	return nil
}

// Epoch is the epoch this instance took at boot (0 while it booted
// read-only and has written nothing yet).
func (inst *Instance) Epoch() int64 { return inst.epoch.Load() }

// CheckEpoch is the epoch fence for a write made in tx outside core's
// write path (a host's delete of the tree, wasm/guest; a Reopen's new
// epoch, which must not supersede a newer instance): it fails with
// ErrFenced unless this instance still owns the tree, that is, the tree's
// epoch is the one it took, or, for an instance that booted read-only and
// has taken none yet, still the one it found at boot (no instance booted
// since; core would let its first write take the next one, ensureEpoch),
// or one marked as its own: its take was stored although reported failed
// (a late IOERR), and core's next write keeps it (takeEpoch).
// For a closed instance that no Reopen is replacing or has replaced, an
// epoch marked as its reopen's (reopenOwner) passes too: the Reopen that
// took it failed (its take reported failed, the read that follows refused) and
// returned no instance, so none holds that epoch, and the tree is still
// this one's: its host's delete goes on, and the reopen tried again keeps
// the epoch. Fenced there, a guest took a delete sent before that retry
// for a newer instance's tree: it stopped reopening, and the tree's
// claims were left with no instance and no wake-up.
// Checked in the write's own transaction, it is atomic with the write: a
// superseded instance never commits it. It takes no epoch itself.
func (inst *Instance) CheckEpoch(tx storage.Tx) error {
	var epoch int64
	var owner sql.NullString
	if _, err := storage.QueryRow(tx, `SELECT epoch, epoch_owner FROM tree`, nil, &epoch, &owner); err != nil {
		return fmt.Errorf("check epoch: %w", err)
	}
	mine := inst.epoch.Load()
	switch {
	case owner.Valid && inst.isClosed() && !inst.reopened.Load() && owner.String == reopenOwner(inst.owner):
	case mine != 0 && epoch != mine:
		return fmt.Errorf("instance epoch %d, database epoch %d: %w", mine, epoch, ErrFenced)
	case mine == 0 && epoch != inst.bootEpoch && (!owner.Valid || owner.String != inst.owner):
		return fmt.Errorf("instance booted at database epoch %d without one of its own, database epoch %d: %w", inst.bootEpoch, epoch, ErrFenced)
	}
	return nil
}

// ReadOnly reports whether the instance serves reads only because its
// storage would not take writes (DESIGN §8): writes then fail at once with
// ErrReadOnly unless their one try succeeds, which makes it writable again.
func (inst *Instance) ReadOnly() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.readOnly != nil
}

// enterReadOnly makes the instance read-only because of err.
func (inst *Instance) enterReadOnly(err error) {
	inst.mu.Lock()
	was := inst.readOnly != nil
	inst.readOnly = err
	inst.mu.Unlock()
	if !was {
		inst.log.Error("storage would not take writes for the whole settlement window; the tree is read-only", "err", err)
	}
}

// wrote notes a write that storage took: a read-only instance is writable
// again.
func (inst *Instance) wrote() {
	inst.mu.Lock()
	was := inst.readOnly != nil
	inst.readOnly = nil
	inst.mu.Unlock()
	if was {
		inst.log.Info("storage takes writes again; the tree is writable")
	}
}

// owe records that x's turn must end failed{type:"storage"} once storage
// returns.
func (inst *Instance) owe(x *Execution, message string) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.owed[x.sessionID] = owedFailure{executionID: x.id, promptID: x.promptID, message: message}
}

// owedFor returns the storage failure owed to the session's turn, if any.
func (inst *Instance) owedFor(sessionID string) (owedFailure, bool) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	o, ok := inst.owed[sessionID]
	return o, ok
}

func (inst *Instance) forgetOwed(sessionID string) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	delete(inst.owed, sessionID)
}

// Config is the instance's configuration.
func (inst *Instance) Config() Config { return inst.cfg }

// Clock is the host clock.
func (inst *Instance) Clock() Clock { return inst.host.Clock }

// Close is a graceful stop: every running execution is cancelled with
// ErrShutdown and records interrupted{reason:"shutdown"}, which keeps its
// claim, so the next boot resumes it exactly as after a crash. Close waits
// for the executions to stop or for ctx to end.
func (inst *Instance) Close(ctx context.Context) error {
	return inst.stopAll(ctx, ErrShutdown)
}

// Abandon stops every execution without writing anything and without
// waiting, as if the process had died at this instant. Tests and the
// simulator use it to crash an instance in process; a real host never needs
// it. A body that ignores cancellation may still run; its writes must be
// stopped by the host (a killed connection) or by the fence.
func (inst *Instance) Abandon() {
	inst.cancelAll(errAbandoned)
	inst.closeSubscriptions()
}

func (inst *Instance) cancelAll(cause error) chan struct{} {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if !inst.closed {
		inst.closed, inst.stopCause = true, cause
		close(inst.stopping)
	}
	for _, x := range inst.running {
		x.cancel(cause)
	}
	return inst.idle
}

func (inst *Instance) stopAll(ctx context.Context, cause error) error {
	idle := inst.cancelAll(cause)
	// Subscriptions end whatever happens: the instance is closed, and a
	// follower must look for the tree's next instance (or learn it is gone).
	defer inst.closeSubscriptions()
	select {
	case <-idle: // checked first: an ended ctx must not win over an idle instance
		inst.markStopped()
		return nil
	default:
	}
	select {
	case <-idle:
		inst.markStopped()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close instance: executions still running: %w", ctx.Err())
	}
}

func (inst *Instance) markStopped() {
	inst.mu.Lock()
	inst.stopped = true
	inst.mu.Unlock()
}

// closeSubscriptions ends every live subscription of a stopped instance, so
// a follower learns to look for the tree's next instance.
func (inst *Instance) closeSubscriptions() {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	for _, set := range inst.subs {
		for s := range set {
			s.closeLocked()
		}
	}
}

// Closed is true once Close or Abandon was called; its subscriptions end
// and a follower must find the tree's next instance.
func (inst *Instance) Closed() bool { return inst.isClosed() }

// WaitIdle blocks until no execution runs in this instance, or ctx ends.
func (inst *Instance) WaitIdle(ctx context.Context) error {
	inst.mu.Lock()
	idle := inst.idle
	inst.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Idle reports whether no execution runs in this instance right now and it
// owes no turn a storage failure: closing it (idle eviction) loses nothing
// that only memory holds.
func (inst *Instance) Idle() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return len(inst.running) == 0 && len(inst.owed) == 0
}

// RunningHere reports whether an execution of the session runs in this
// instance.
func (inst *Instance) RunningHere(sessionID string) bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.running[sessionID] != nil
}

// refusesWrites reports whether the instance writes nothing more: it was
// abandoned (a crashed instance writes nothing, whatever its goroutines
// still try) or its Close has finished.
func (inst *Instance) refusesWrites() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.stopped || errors.Is(inst.stopCause, errAbandoned)
}

func (inst *Instance) isClosed() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.closed
}

// Subscription receives a session's events after they commit. C is closed
// when the subscription is closed or falls behind (its buffer filled); a
// subscriber that finds it closed re-reads the log from its cursor.
type Subscription struct {
	C         <-chan event.Event
	c         chan event.Event
	inst      *Instance
	sessionID string
	once      sync.Once
}

// Subscribe starts a subscription to sessionID with the given buffer, at
// least one event: with none, every event would find it behind and close
// it, and a negative size is no channel at all. On a closed instance the
// subscription starts closed.
func (inst *Instance) Subscribe(sessionID string, buffer int) *Subscription {
	c := make(chan event.Event, max(buffer, 1))
	s := &Subscription{C: c, c: c, inst: inst, sessionID: sessionID}
	inst.mu.Lock()
	if inst.closed {
		inst.mu.Unlock()
		s.once.Do(func() { close(s.c) })
		return s
	}
	if inst.subs[sessionID] == nil {
		inst.subs[sessionID] = map[*Subscription]struct{}{}
	}
	inst.subs[sessionID][s] = struct{}{}
	inst.mu.Unlock()
	return s
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.inst.mu.Lock()
	defer s.inst.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	s.once.Do(func() {
		delete(s.inst.subs[s.sessionID], s)
		close(s.c)
	})
}

// publish tells live subscribers about committed events, never blocking.
func (inst *Instance) publish(evs []event.Event) {
	if len(evs) == 0 {
		return
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	for _, ev := range evs {
		for s := range inst.subs[ev.SessionID] {
			select {
			case s.c <- ev:
			default:
				s.closeLocked() // fell behind: it must catch up from the log
			}
		}
	}
}
