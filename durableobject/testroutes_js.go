//go:build js && wasm && revenant_testroutes

package durableobject

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// Test-only routes, compiled in with the revenant_testroutes tag only
// (the e2e tests build a separate wasm; make do-build never has them).
// They provoke what a test cannot otherwise cause on demand:
//
//	POST /v1/sessions/{id}/test/abort  ctx.abort(): the object is evicted
//	                                   at once, mid-turn if one runs
//	POST /v1/sessions/{id}/test/panic  a Go panic in the request's handler
//	                                   (?linger=1: the shim leaves the object
//	                                   given up but not aborted until its
//	                                   next request, shim.js)
//	POST /v1/sessions/{id}/test/stream-panic  an event stream's first
//	                                   chunk, then (once the shim has the
//	                                   answer) a Go panic in its handler
//	POST /v1/sessions/{id}/test/exit   204, then a panic escapes Go on a
//	                                   goroutine of its own: the program ends
//	                                   between events, the object not aborted
//	                                   (the next event must give it up)
//	POST /v1/sessions/{id}/test/exit-now  the program ends while this
//	                                   request waits, unanswered (?later=1:
//	                                   from a timer, once Go's call for the
//	                                   request has returned its Promise)
//	GET  /v1/sessions/{id}/test/read-exit  a read during which the program
//	                                   ends, as exit-now, the first time in
//	                                   this isolate for the tree; 204 after
//	                                   that (testReadExit)
//	POST /v1/sessions/{id}/test/as?principal=P  every tree route sent to
//	                                   the object as principal P, as a front
//	                                   that let it through would; answers each
//	                                   route's status (testAs)
//	POST /v1/sessions/{id}/test/foreign  how many requests the object refused
//	                                   for naming another principal
//	POST /v1/sessions/{id}/test/headers  the names of the headers the object
//	                                   received with this request
//	POST /v1/sessions/{id}/test/alarm?then=panic|exit  the alarm set for
//	                                   now; its handler panics (then=panic) or
//	                                   ends the Go program while it waits
//	                                   (then=exit), once (testWake)
//	POST /v1/sessions/{id}/test/fail-delete  the object's next deleteAll fails
//	POST /v1/sessions/{id}/test/stuck-turn  the object's next turn ignores
//	                                   its cancellation: it never ends
//	                                   (testTurn)
//	POST /v1/sessions/{id}/test/delete-tree  the tree deleted in the object
//	                                   alone, its directory row kept (a front
//	                                   killed between the two)
//	POST /v1/sessions/{id}/test/env?name=N  whether the tree's Go program
//	                                   has the var or secret N (never its value)
//	POST /v1/sessions/{id}/test/conform  storagetest's suite on this object's
//	                                   DB (testconform_js.go); ?broken=no-rollback
//	                                   runs it on a DB that never rolls back
//
// and the var REVENANT_TEST_BOOT_DELAY slows every boot (testBootDelay),
// and the var REVENANT_TEST_CREATED_AT (ms) is the created_at every
// create's 201 names for the front's directory (testCreatedAt), and the
// var REVENANT_TEST_LOSE_CREATE (before, after) aborts the object during
// a create (testLoseCreate). The shim itself holds any request whose URL
// has test-hold=body or =answer until the object is given up
// (shim.js, testHoldUntilGivenUp), or test-hold=never for good
// (testHoldForGood), and from a request whose URL has test-sync=never on
// makes the object's storage.sync never settle (testSyncNever: the
// abort of an object given up must not wait for it for good), and logs
// each alarm handler that returns rather than aborting the object (an
// alarm used up: the tests of a failed handler wait on it); with the
// var REVENANT_TEST_GIVE_UP_WAIT_MS (ms) a given-up object waits that
// long for its answers in hand and its sync, not what the tree's
// interrupt grace makes it (testGiveUpWait).
const testRoutePrefix = "/test/"

func testRoute(o *Object, w httpmsg.ResponseWriter, r *httpmsg.Request) bool {
	if !strings.HasPrefix(r.URL.Path, "/v1/sessions/") {
		return false
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/sessions/")
	_, what, ok := strings.Cut(rest, testRoutePrefix)
	if !ok {
		return false
	}
	if r.Method == httpmsg.MethodGet && what == "read-exit" {
		testReadExit(o, w, r)
		return true
	}
	if r.Method != httpmsg.MethodPost {
		return false
	}
	switch what {
	case "abort":
		o.log.Warn("test route: aborting the object")
		o.bridge.Call("abort", "revenant test route: abort")
		panic("unreachable: ctx.abort returned") // abort throws into Go as a panic
	case "panic":
		panic("revenant test route: panic")
	case "stream-panic":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(": before the panic\n\n"))
		w.(httpmsg.Flusher).Flush()
		// A timer is a later JS task than the shim's handling of the
		// answer: the panic comes after the shim checked for a give-up.
		time.Sleep(testExitDelay)
		panic("revenant test route: a panic in an answered stream")
	case "exit":
		o.log.Warn("test route: the Go program exits after this answer")
		w.WriteHeader(httpmsg.StatusNoContent)
		// After the answer is out (a timer is a later JS task than the
		// shim's handling of this answer): a panic in the handler itself
		// would end the program mid-request, which the shim's fetch
		// answers and aborts at once.
		time.AfterFunc(testExitDelay, func() { panic("revenant test route: exit") })
		return true
	case "exit-now":
		// The program ends while this request waits for its answer: the
		// shim must answer it from the program's end, not wait forever.
		o.log.Warn("test route: the Go program exits during this request")
		if r.URL.Query().Has("later") {
			// From a timer: a later JS task than the call that began
			// this request, which has returned its Promise by then.
			time.AfterFunc(testExitDelay, func() { panic("revenant test route: exit during a request, later") })
		} else {
			go func() { panic("revenant test route: exit during a request") }()
		}
		<-r.Context().Done()
		return true
	case "as":
		testAs(o, w, r)
		return true
	case "foreign":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"refused": o.foreignRefused.Load()})
		return true
	case "headers":
		// The names of the headers the object received (never their
		// values): what the front passes on from the client.
		names := make([]string, 0, len(r.Header))
		for name := range r.Header {
			names = append(names, strings.ToLower(name))
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string][]string{"headers": names})
		return true
	case "alarm":
		o.testNextWake.Store(r.URL.Query().Get("then"))
		if err := o.alarm.Arm(r.Context(), o.clock.Now()); err != nil {
			panic(err)
		}
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "fail-delete":
		how := failDeleteReject
		if r.URL.Query().Get("how") == "throw" {
			how = failDeleteThrow
		}
		o.failNextDelete.Store(how)
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "stuck-turn":
		o.testStuckTurn.Store(true)
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "delete-tree":
		if err := o.index().Delete(r.Context(), o.treeID); err != nil {
			panic(err)
		}
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "env":
		_, set := os.LookupEnv(r.URL.Query().Get("name"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]bool{"set": set})
		return true
	case "conform":
		serveConform(o, w, r)
		return true
	}
	return false
}

// testWake does what the alarm route asked of the next alarm handler, as
// it starts: panic, or end the Go program while the handler waits (a
// panic on a goroutine of its own, which runs once the handler blocks
// here for good).
func testWake(o *Object) {
	then, _ := o.testNextWake.Swap("").(string)
	switch then {
	case "panic":
		panic("revenant test route: the alarm handler panics")
	case "exit":
		go func() { panic("revenant test route: exit during the alarm") }()
		select {}
	}
}

// testTurn, as a turn starts, holds it for good, ignoring its
// cancellation, when the stuck-turn route asked it of this object's next
// turn: the execution a delete cannot stop (deleteTree). Only the
// object's abort ends it; a fresh object's Go program has not been asked.
func testTurn(o *Object) {
	if !o.testStuckTurn.Swap(false) {
		return
	}
	o.log.Warn("test route: this turn ignores its cancellation")
	select {}
}

// testGiveUpWait is wait, or the var REVENANT_TEST_GIVE_UP_WAIT_MS (ms)
// when set: how long a given-up object waits for its answers in hand
// (setWaits), shortened for a test of answers that never return.
func testGiveUpWait(wait time.Duration) time.Duration {
	if ms, err := strconv.ParseInt(os.Getenv("REVENANT_TEST_GIVE_UP_WAIT_MS"), 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return wait
}

// testReadExit ends the Go program while a read waits for its answer, the
// first time in this isolate for the object's tree: the shim then gives
// the object up with the read in hand, the front's fetch fails, and the
// front sends the read again once, to a fresh object (worker/entry.mjs,
// forward), which answers 204. The mark is a global of the isolate, which
// outlives the object and its Go program (as the spare does, shim.js).
func testReadExit(o *Object, w httpmsg.ResponseWriter, r *httpmsg.Request) {
	const marks = "__revenantTestReadExits"
	seen := js.Global().Get(marks)
	if seen.IsUndefined() {
		seen = js.Global().Get("Object").New()
		js.Global().Set(marks, seen)
	}
	if seen.Get(o.treeID).Truthy() {
		w.WriteHeader(httpmsg.StatusNoContent)
		return
	}
	seen.Set(o.treeID, true)
	o.log.Warn("test route: the Go program exits during this read")
	go func() { panic("revenant test route: exit during a read") }()
	<-r.Context().Done()
}

// testExitDelay is how long the exit route's program outlives its answer.
const testExitDelay = 50 * time.Millisecond

// testBootDelay makes the object's boot slow by the var
// REVENANT_TEST_BOOT_DELAY (a Go duration; unset: none), so a test can send
// a request or meet an alarm while the boot runs: the shim must hold both
// until the boot is done (blockConcurrencyWhile), never serve them unbooted.
func testBootDelay() {
	if d, err := time.ParseDuration(os.Getenv("REVENANT_TEST_BOOT_DELAY")); err == nil && d > 0 {
		time.Sleep(d)
	}
}

// testAs sends every tree route (api.Routes) to the object's ServeHTTP as
// the principal the query names, with the front's headers, and answers a
// JSON object of each route's status: the object's own owner check, which
// a front that let a request through would meet, for each route alike.
// An answer that starts (an event stream) is read no further.
func testAs(o *Object, w httpmsg.ResponseWriter, r *httpmsg.Request) {
	principal := r.URL.Query().Get("principal")
	out := map[string]int{}
	for _, rt := range api.Routes {
		if !rt.Tree() {
			continue
		}
		path := strings.NewReplacer("{id}", o.treeID, "{rid}", "x", "{qid}", "x").Replace(rt.Pattern)
		ctx, cancel := context.WithCancel(r.Context())
		req, err := httpmsg.NewRequest(ctx, rt.Method, "https://object"+path, strings.NewReader("{}"))
		if err != nil {
			cancel()
			panic(err)
		}
		req.Header.Set(TreeHeader, o.treeID)
		req.Header.Set(PrincipalHeader, url.PathEscape(principal)) // as the front sends it
		req.Header.Set("Content-Type", "application/json")
		rec := &statusRecorder{header: httpmsg.Header{}, status: make(chan int, 1)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.ServeHTTP(rec, req)
			rec.WriteHeader(httpmsg.StatusOK)
		}()
		out[rt.Method+" "+rt.Pattern] = <-rec.status
		cancel() // an event stream ends with its context
		<-done
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// statusRecorder keeps a response's first status and drops its body.
type statusRecorder struct {
	header httpmsg.Header
	once   sync.Once
	status chan int
}

func (s *statusRecorder) Header() httpmsg.Header { return s.header }
func (s *statusRecorder) WriteHeader(code int) {
	s.once.Do(func() { s.status <- code })
}
func (s *statusRecorder) Write(b []byte) (int, error) {
	s.WriteHeader(httpmsg.StatusOK)
	return len(b), nil
}
func (s *statusRecorder) Flush() {}

// testCreatedAt is the created_at a create's 201 names (at, the new
// session's own), or the var REVENANT_TEST_CREATED_AT (ms) when set: the
// front records every tree with that one time in the caller's directory,
// so a test can list trees whose created_at ties (the directory's cursor
// breaks ties by root id).
func testCreatedAt(at int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv("REVENANT_TEST_CREATED_AT"), 10, 64); err == nil && v > 0 {
		return v
	}
	return at
}

// testLoseCreate aborts the object during a create when the var
// REVENANT_TEST_LOSE_CREATE names the point: "before" the create's
// handler runs (the tree stored by the boot, its root session never
// created), or "after" its commit, as its 201 is written. Either way the
// storage is made durable first (storage.sync), and the front's fetch
// fails: the object's answer is lost, as in a reset or a lost connection.
func testLoseCreate(o *Object, at string) {
	if os.Getenv("REVENANT_TEST_LOSE_CREATE") != at {
		return
	}
	if _, err := await(o.bridge.Get("storage").Call("sync")); err != nil {
		panic(err)
	}
	o.log.Warn("test: aborting the object during its create", "at", at)
	o.bridge.Call("abort", "revenant test: the create's answer lost")
	panic("unreachable: ctx.abort returned") // abort throws into Go as a panic
}

// testBuild tells the shim it runs the tests' build: it then logs what a
// test waits on that the product does not log (a spare Go program ready,
// and taken).
const testBuild = true
