//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/recovery"
)

// DefaultAlarmHold bounds how long the alarm handler holds the object
// while the turns it resumed run. A running event keeps the object
// alive (pending promises alone do not, before compatibility date
// 2026-10-01); the wake-up re-armed at the end continues longer turns.
const DefaultAlarmHold = 60 * time.Second

// Options is what the program around the object chooses.
type Options struct {
	// Setup builds the instance's configuration and turn driver (model and
	// tools) on the object's clock.
	Setup func(core.Clock) (core.Config, core.Driver, error)
	// API is the handler's configuration; the zero value is api.NewConfig().
	API *api.Config
	// AlarmHold: DefaultAlarmHold when zero.
	AlarmHold time.Duration
	// Log: text to stderr (the object's console) when nil.
	Log *logs.Logger
}

// Object is one Durable Object's tree: the instance, its API handler and
// the entry points the shim calls.
type Object struct {
	opts   Options
	bridge js.Value
	log    *logs.Logger
	clock  Clock
	db     *DB
	alarm  *Alarm
	// treeDB, when set, is the tree's database the boot opens instead of
	// db (a test's own SQLite, to boot an object through boot itself);
	// db still orders the alarm's storage calls.
	treeDB storage.DB

	treeID string
	inst   *core.Instance
	dir    *api.Directory   // create and delete of the one tree
	tree   *api.TreeHandler // every /v1/sessions/{id}/… route
	routes *route.Mux       // the tree's routes (api.Route.Tree), to tell them apart

	// closeWait bounds how long a delete waits for the tree's executions
	// to stop (deleteTree): the configured interrupt grace, at least
	// minCloseWait (setWaits).
	closeWait time.Duration

	mu            sync.Mutex
	deleted       bool
	ownerSeen     string // the tree's owner once read (owner)
	createdAt     int64  // the root session's created_at once created here (created)
	sweepFailures int    // consecutive failed sweeps, under mu

	failNextDelete atomic.Int32 // set by a test build's route only: the next deleteAll fails (failDelete*)
	testNextWake   atomic.Value // set by a test build's route only: what the next alarm handler does (testWake)
	testStuckTurn  atomic.Bool  // set by a test build's route only: the next turn ignores its cancellation (testTurn)
	foreignRefused atomic.Int64 // requests refused for naming another principal (ServeHTTP)
}

// Serve runs the object behind bridge, the shim's per-object JS object.
// At boot it reads bridge.storage (ctx.storage), bridge.txSync and
// sql.mjs's helpers (bridge.sqlExec, sqlScript, sqlQuery); it sets the
// entry points the shim calls:
//
//	boot(treeID, alarmAt) → Promise<undefined>  (inside blockConcurrencyWhile)
//	fetch(method, url, headers, body) → Promise<Response>
//	alarm() → Promise<undefined>                 (never rejects)
//
// then blocks forever: the Go program lives as long as the object.
func Serve(bridge js.Value, opts Options) {
	if opts.AlarmHold <= 0 {
		opts.AlarmHold = DefaultAlarmHold
	}
	if opts.Log == nil {
		opts.Log = logs.New(logs.NewTextHandler(os.Stderr, time.Now)) // slog.TextHandler's lines, without log/slog
	}
	o := &Object{opts: opts, bridge: bridge, log: opts.Log}
	bridge.Set("boot", entry("boot", o.boot))
	bridge.Set("fetch", entry("fetch", o.fetch))
	bridge.Set("alarm", entry("alarm", o.alarmEvent))
	bridge.Set("testBuild", testBuild)
	select {}
}

// boot is recovery's boot sequence for the object's tree: migrations, a
// new epoch, the API handler, the sweep, the wake-up re-armed from
// durable state. A sweep that failed still serves; the alarm retries it.
func (o *Object) boot(args []js.Value) (any, error) {
	if o.inst != nil {
		return nil, errors.New("already booted")
	}
	if len(args) < 2 || args[0].Type() != js.TypeString {
		return nil, errors.New("want (treeID, alarmAt)")
	}
	testBootDelay() // test builds only: a slow boot on demand
	o.treeID = args[0].String()
	var at int64
	if args[1].Type() == js.TypeNumber {
		at = int64(args[1].Float())
	}
	// The storage is read now, not at Serve: the shim may start this
	// program before any object owns it (a spare) and hand it over.
	o.db = NewDB(o.bridge.Get("storage").Get("sql"), o.bridge)
	o.alarm = NewAlarm(o.bridge.Get("storage"), at)
	o.alarm.db = o.db
	o.log = o.log.With("tree", o.treeID)
	cfg, driver, err := o.opts.Setup(o.clock)
	if err != nil {
		// The Worker's vars and secrets, not the storage: every boot fails
		// alike until they change, and the shim answers so (setupError).
		return nil, setupError{fmt.Errorf("set up tree %s: %w", o.treeID, err)}
	}
	o.setWaits(cfg)
	driver = o.afterAnswer(driver)
	var db storage.DB = o.db
	if o.treeDB != nil {
		db = o.treeDB
	}
	host := core.Host{DB: db, Clock: o.clock, Wake: o.alarm, IDs: IDs{}, Log: o.log}
	inst, rep, err := recovery.BootWith(context.Background(), host, cfg, driver, o.opened)
	if inst == nil {
		return nil, fmt.Errorf("boot tree %s: %w", o.treeID, err)
	}
	o.swept("boot", err)
	o.log.Info("tree booted", "resumed", rep.Count(core.Resume), "started", rep.Count(core.Start),
		"decisions", len(rep.Decisions), "epoch", inst.Epoch())
	return nil, nil
}

// The bounds of how long an object given up waits for the answers it has
// in hand, and then for its storage's pending writes, before it aborts
// all the same (shim.js, abortPastWait and abortSoon). The slowest answer
// the object gives returns from an interrupt, which waits up to the
// tree's interrupt grace for the running turn to record it, and from a
// delete, which waits as long, and at least minCloseWait, for the tree's
// turns to stop (deleteTree, closeWaitFor); each then writes, or deletes,
// on storage. So the wait is the delete's and giveUpMargin for the
// storage, but never more than maxGiveUpWait: until the abort every other
// request to the tree is refused (the front answers it 503 after about
// 400 ms of sends again), and the platform itself resets an object held
// 30 s in blockConcurrencyWhile, its own bound on an object that
// answers nothing. A grace longer than maxGiveUpWait less giveUpMargin
// is still an interrupt's (and a delete's) wait while the object serves;
// only one in hand as the object is given up may be cut, which its
// client reads as a 503 to retry (setWaits logs it).
//
// minCloseWait is there for a grace set tiny so that interrupts do not
// wait ("1ns": a file's 0 is the default): a turn that heeds its
// cancellation still takes a moment to stop, and a delete that gave up
// on it sooner would answer 503 and give the object up, and so would
// every delete after, each fresh object's boot resuming the turn.
const (
	minCloseWait  = 5 * time.Second
	giveUpMargin  = 5 * time.Second
	maxGiveUpWait = 25 * time.Second
)

// closeWaitFor is how long a delete waits for the tree's turns to stop,
// for a tree whose interrupt grace is grace: the grace, at least
// minCloseWait.
func closeWaitFor(grace time.Duration) time.Duration { return max(grace, minCloseWait) }

// giveUpWait is the wait of an object given up for its answers in hand,
// for a tree whose interrupt grace is grace (the bounds above): 10 s to
// 25 s.
func giveUpWait(grace time.Duration) time.Duration {
	return min(closeWaitFor(grace)+giveUpMargin, maxGiveUpWait)
}

// setWaits sets the object's waits from the tree's configuration: a
// delete's for its turns to stop (closeWait), and, for the shim, an
// object given up's for its answers (bridge.giveUpWaitMS, giveUpWait; in
// the tests' build the var REVENANT_TEST_GIVE_UP_WAIT_MS when set).
func (o *Object) setWaits(cfg core.Config) {
	grace := cfg.InterruptGrace()
	o.closeWait = closeWaitFor(grace)
	o.bridge.Set("giveUpWaitMS", testGiveUpWait(giveUpWait(grace)).Milliseconds())
	if grace+giveUpMargin > maxGiveUpWait {
		o.log.Warn("interrupt_grace is longer than an object given up waits for its answers: an interrupt or a delete in hand as the object is given up may be cut (its client told 503)",
			"interrupt_grace", grace, "give_up_wait", maxGiveUpWait)
	}
}

// setupError is a boot that failed in Options.Setup: the object's
// configuration is wrong, so retrying cannot help. Its rejection carries
// revenantSetup: true for the shim (newPromise).
type setupError struct{ error }

func (e setupError) Unwrap() error { return e.error }

// afterAnswer runs d's turns once the request that admitted them has had
// its answer let go. Go on js/wasm returns to the event loop only when no
// goroutine can run, and a turn runs synchronous SQL until its first
// fetch: started at once, it held the prompt's 202 (and, where the front
// shares the isolate, the front's forwarding of it) until then. So the
// turn first waits until the storage writes so far are durable
// (storage.sync(): the admission, claim and wake-up, which the 202's
// output gate waits for too, DESIGN §6.1) and then one timer tick, which
// lets the queued answer go. The claim and the wake-up are already
// committed: a turn that never gets past the wait is resumed by the alarm.
func (o *Object) afterAnswer(d core.Driver) core.Driver {
	return core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		storage := o.bridge.Get("storage")
		if storage.Get("sync").Type() == js.TypeFunction {
			// A sync that throws (a broken object's storage) fails like one
			// that rejects: as a panic it would fail the turn as the driver's.
			p, err := callJS(func() js.Value { return storage.Call("sync") })
			if err == nil {
				_, err = await(p)
			}
			if err != nil {
				o.log.Warn("storage sync before a turn failed", "err", err)
			}
		}
		nextTask()
		testTurn(o)
		return d.Run(ctx, x)
	})
}

// opened makes the open instance ready to serve before the sweep starts:
// the directory of the one tree (create, delete) and the per-tree handler.
func (o *Object) opened(inst *core.Instance) error {
	o.inst = inst
	cfg := api.NewConfig()
	if o.opts.API != nil {
		cfg = *o.opts.API
	}
	dir, err := api.NewDirectory(api.DirectoryDeps{Index: o.index(), Auth: frontPrincipal{}, IDs: o.index(), Log: o.log, Panicked: o.routePanicked}, cfg)
	if err != nil {
		return fmt.Errorf("new api directory: %w", err)
	}
	tree, err := api.NewTreeHandler(api.TreeDeps{Clock: o.clock, Log: o.log, Panicked: o.routePanicked}, cfg)
	if err != nil {
		return fmt.Errorf("new api tree handler: %w", err)
	}
	o.dir, o.tree = dir, tree
	o.routes = &route.Mux{}
	for _, rt := range api.Routes {
		if rt.Tree() {
			o.routes.HandleFunc(rt.Method+" "+rt.Pattern, nil)
		}
	}
	return nil
}

// ServeHTTP serves a request the front Worker forwarded (the contract in
// doc.go): the tree's routes with the per-tree handler for the principal
// the front named, once that principal is known to own the tree; the rest
// (POST /v1/sessions creating the tree, DELETE of the root) with the
// directory of the one tree. The front did the Host, Origin and token
// checks; a request for another tree is 404.
func (o *Object) ServeHTTP(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	if r.Header.Get(TreeHeader) != o.treeID {
		api.WriteError(w, &api.Error{Type: api.ErrNotFound, Message: "no such session"})
		return
	}
	if _, pattern := o.routes.Handler(r); pattern == "" {
		if o.unmade(r.Context(), w, r) {
			return
		}
		if r.Method == "POST" {
			testLoseCreate(o, "before")
			w = createdWriter{ResponseWriter: w, o: o} // a create's 201 names its created_at
		}
		o.dir.ServeRoute(w, r)
		return
	}
	principal, err := frontPrincipal{}.Authenticate(r, false)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	owner, err := o.owner(r.Context())
	if err == nil && owner != principal {
		// The front checks ownership before it forwards: a request that
		// gets here for another principal's tree means the front (or its
		// owner cache) let one through. This check keeps it out; the line
		// says the front needs looking at.
		o.log.Warn("a request for another principal's tree reached the object", "principal", principal, "method", r.Method, "path", r.URL.Path)
		o.foreignRefused.Add(1)
		err = &api.Error{Type: api.ErrNotFound, Message: "no such session"}
	}
	if err != nil {
		if api.Internal(err) {
			o.log.Error("request failed", "err", err)
		}
		api.WriteError(w, err)
		return
	}
	o.tree.ServeTree(w, r, api.Tree{RootID: o.treeID, Principal: principal, Instance: o.inst})
}

// owner is the principal owning the object's tree. A root session's
// owner never changes, so it is read from storage once and then kept;
// a deleted tree has none (the index answers ErrTreeNotFound).
func (o *Object) owner(ctx context.Context) (string, error) {
	o.mu.Lock()
	owner, deleted := o.ownerSeen, o.deleted
	o.mu.Unlock()
	if owner != "" && !deleted {
		return owner, nil
	}
	info, err := o.index().Owner(ctx, o.treeID)
	if err != nil {
		return "", err
	}
	o.mu.Lock()
	o.ownerSeen = info.Principal
	o.mu.Unlock()
	return info.Principal, nil
}

// fetch serves one request (ServeHTTP). A panic answers 500 (or errors a
// stream already started) and leaves the program running.
func (o *Object) fetch(args []js.Value) (any, error) {
	if o.dir == nil {
		return nil, errors.New("not booted")
	}
	if len(args) < 4 {
		return nil, errors.New("want (method, url, headers, body)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := newRequest(ctx, args[0].String(), args[1].String(), args[2], args[3])
	if err != nil {
		cancel()
		return nil, err
	}
	answer := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { answer <- v }, cancel)
	go func() {
		defer cancel()
		if _, err := catch(func() (any, error) { o.serve(w, r); return nil, nil }); err != nil {
			o.log.Error("request panicked", "method", r.Method, "path", r.URL.Path, "err", err)
			// The panic may have left the program's state half-changed:
			// the shim gives the object up once this answer is out, and
			// the next event gets a fresh one on the same storage.
			o.giveUp("a request panicked")
			w.fail()
			return
		}
		w.finish()
	}()
	return <-answer, nil
}

// routePanicked is told of a route's panic once core/api answered it 500.
// What the panic cut short is unknown (a delete between its steps, say),
// so the object is given up, as after a panic the shim recovers itself,
// and a fresh object serves the tree as storage has it. A delete the
// panic cut after it cleared the alarm would leave stopped turns with no
// wake-up: the alarm is set again (on a tree whose storage is gone it
// finds nothing to boot).
func (o *Object) routePanicked(route string) {
	if o.alarm != nil && o.alarm.isCleared() {
		o.alarm.restore(o.clock.Now() + retry.Wake().Delay(0).Milliseconds())
	}
	o.giveUp("a request's handler panicked (" + route + ")")
}

// giveUp tells the shim to give this object up (ctx.abort) once no
// request's answer is pending: its memory no longer matches the storage (a
// handler panicked midway, a delete failed after closing the tree), and a
// fresh object boots from the storage alone. A request that reaches the
// object before then is refused unread, for the front to send again
// (shim.js, refuseSpent); an alarm gives it up at once. The shim is also
// told now (bridge.gaveUp, if it set one): a panic in an event stream
// already answered leaves no answer for the shim to check, and the object
// must not serve on until its next event.
func (o *Object) giveUp(reason string) {
	o.bridge.Set("giveUp", reason)
	if told := o.bridge.Get("gaveUp"); told.Type() == js.TypeFunction {
		told.Invoke(reason)
	}
}

// wake is the alarm handler (DESIGN §4 rule 2): sweep, hold the object
// while the turns run (bounded), then re-arm as the last act. It never
// fails: a failed sweep re-arms on the wake schedule instead. A tree
// deleted before or during the handler (its delete stops the turns, which
// ends the hold) is not swept or re-armed: its storage is gone.
func (o *Object) wake([]js.Value) (any, error) {
	if o.alarm == nil || o.inst == nil || o.isDeleted() {
		return nil, nil // never booted, or deleted: nothing to wake for
	}
	o.alarm.delivered()
	testWake(o)
	ctx := context.Background()
	rep, sweepErr := recovery.Wake(ctx, o.inst)
	o.swept("alarm", sweepErr)
	// The hold starts: a line says whether turns run (a test deletes the
	// tree while one holds).
	o.log.Info("alarm swept", "running", !o.inst.Idle(), "resumed", rep.Count(core.Resume), "started", rep.Count(core.Start))
	hold, cancel := context.WithTimeout(ctx, o.opts.AlarmHold)
	_ = o.inst.WaitIdle(hold) // past the hold the re-armed alarm continues
	cancel()
	if o.isDeleted() {
		o.log.Info("alarm handled", "idle", o.inst.Idle(), "deleted", true)
		return nil, nil
	}
	at, err := o.inst.Rearm(ctx)
	if err != nil {
		o.rearmFailed(sweepErr, err)
	}
	// Alarms are rare (a claim, a retry, a crash): one line each says
	// what the wake-up did, and e2e tests wait on it.
	o.log.Info("alarm handled", "idle", o.inst.Idle(), "resumed", rep.Count(core.Resume), "started", rep.Count(core.Start),
		"decisions", len(rep.Decisions), "rearmed_at", at)
	return nil, nil
}

// alarmEvent is wake for the shim. wake never fails, so an error is a
// panic: the wake-up is used up and was not re-armed, and the program's
// state may be half-changed. The object gives itself up (as after a
// request's panic), and the shim then aborts it, so that workerd retries
// the alarm on a fresh object, whose boot re-arms from storage.
func (o *Object) alarmEvent(args []js.Value) (any, error) {
	v, err := catch(func() (any, error) { return o.wake(args) })
	if err != nil {
		o.log.Error("alarm panicked", "err", err)
		o.giveUp("the alarm handler panicked")
	}
	return v, err
}

// rearmFailed ends a wake whose last re-arm failed with err after its
// sweep ended with sweepErr. One failed wake counts once on the wake
// schedule: a sweep that failed already counted and armed its retry,
// which stays (Arm keeps an earlier alarm).
func (o *Object) rearmFailed(sweepErr, err error) {
	if sweepErr == nil {
		o.swept("alarm", err)
		return
	}
	o.log.Warn("alarm re-arm failed; the sweep's retry alarm stands", "err", err)
}

// swept ends a sweep. One that failed could not tell whether work
// remains, and the alarm that started it is used up: re-arm on the wake
// schedule (1 s doubling to 1 min) so no claim is left without a wake-up.
// A deleted tree has nothing to retry (its failures are the missing
// tables): nothing is counted or armed.
func (o *Object) swept(what string, err error) {
	o.mu.Lock()
	if err == nil || o.deleted {
		o.sweepFailures = 0
		o.mu.Unlock()
		return
	}
	o.sweepFailures++
	d := retry.Wake().Delay(o.sweepFailures - 1)
	o.mu.Unlock()
	o.log.Warn(what+" sweep failed; the alarm retries it", "err", err, "in", d)
	if err := o.alarm.Arm(context.Background(), o.clock.Now()+d.Milliseconds()); err != nil {
		o.log.Error("arm the retry alarm", "err", err)
	}
}

// fail ends an answer whose handler panicked: 500 if nothing was sent,
// otherwise the stream errors.
func (w *responseWriter) fail() {
	w.mu.Lock()
	if w.streaming() {
		w.end(true)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.header = httpmsg.Header{"Content-Type": {"application/json"}}
	w.status = httpmsg.StatusInternalServerError
	w.buf.Reset()
	w.buf.WriteString(`{"error":{"type":"internal","message":"internal error"}}`)
	w.finish()
}

// serve is ServeHTTP behind the test-only routes, which exist only in a
// build with the revenant_testroutes tag (testroutes_js.go).
func (o *Object) serve(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	if testRoute(o, w, r) {
		return
	}
	o.ServeHTTP(w, r)
}
