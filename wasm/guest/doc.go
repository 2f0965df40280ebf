//go:build wasip1

// Command guest is revenant compiled to a wasip1 reactor: one tree per
// instance (core.Instance + recovery + the turn runner + the API handler),
// driven entirely through the ABI of package wasm/abi (docs/abi.md).
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath \
//		-gcflags='github.com/revenantrt/revenant/...=-l' -gcflags='github.com/revenantrt/revenant/wasm/abi=' \
//		-gcflags='github.com/revenantrt/revenant/wasm/guestdb=' -gcflags=fmt=-l -gcflags=internal/fmtsort=-l \
//		-gcflags=net/url=-l -gcflags=time=-l -ldflags='-s -w' -o revenant.wasm ./wasm/guest
//
// (make guest; internal/guestbuild.Flags says why the -gcflags).
//
// The host calls _initialize once, then revenant_boot, then any export.
// Everything slow is split in two: the guest starts it through an import
// (egress_start, timer_set, wake_arm_checked) and the host answers later through an
// export (revenant_egress_*, revenant_timer, revenant_wake). Durable events
// leave through emit after their commit, live deltas as they happen, API
// responses through respond (an event stream a chunk per flush). Secrets
// never enter the guest: the host adds the provider's key and performs the
// tools' HTTP (webhook signatures included); API tokens arrive hashed.
// Every egress request carries the instance's epoch (ABI 1.2, to a host
// that announced 1.2 or later), so the host, which owns egress, refuses a
// superseded instance's (DESIGN §15, zombie egress); an instance that
// booted read-only sends abi.NoEpoch until its first write takes one.
// Every tool call carries the session's own and the tree's saved
// permission rules (ABI 1.5, to a host that announced 1.5 or later), so
// the host decides what the call reaches as it runs (an http_request
// redirect) by the same policy the guest's runner decided the call by.
// An answer a route aborts once its head is out ends aborted (ABI 1.11, to
// a host that announced 1.11 or later), so the host cuts it short for its
// client as net/http does in process.
//
// Built with the build tag revenant_testhooks (internal/guestbuild's
// TestHooksTag), it is the test guest: testhooks_on.go lets a request
// provoke, by its X-Revenant-Test-Hook header, what no route does on
// purpose (a failure after the head). The guest users run has no hook:
// testhooks_off.go's constant removes the call.
//
// # No export blocks on I/O: the quiescence rule
//
// Go's wasmexport (Go 1.24+, checked against Go 1.26's runtime) runs the
// exported function on the goroutine the runtime parked after
// _initialize. Other goroutines run only while some export is on the
// stack, when it blocks or yields. If the export's own goroutine blocks and
// no goroutine is runnable, the runtime does not return to the host: with
// a Go timer pending it sleeps in poll_oneoff, and without one checkdead
// aborts ("all goroutines are asleep"), because on wasm a c-shared library
// gets no exemption from deadlock detection (runtime/proc.go checkdead;
// beforeIdle is a no-op on wasip1, runtime/lock_wasip1.go). So:
//
//  1. An export only delivers its input: it starts a goroutine (a request,
//     a wake sweep, a shutdown) or queues data and signals a channel of
//     capacity one (egress chunks, timer callbacks). It never waits.
//     (revenant_idle only reads whether an execution runs, and
//     revenant_diag_sql, a benchmark, makes its SQL calls itself: both
//     start nothing.)
//  2. It then settles: runtime.Gosched in a loop, reading the scheduler's
//     /sched/goroutines/runnable:goroutines metric after each yield, and
//     returns StatusIdle as soon as no other goroutine is runnable. wasm
//     has one thread and no preemption, so the count is exact when read:
//     zero means every other goroutine is blocked on something only a
//     later export can release (a host answer, a timer, a request).
//  3. Past maxRounds yields it returns StatusPending and the host calls
//     revenant_pump, which settles again; the host's watchdog bounds the
//     total, so a goroutine that spins on Gosched cannot hold the host.
//
// The guest uses no Go runtime timer (no time.Sleep, time.AfterFunc or
// context deadline): core.Clock.AfterFunc becomes a host timer, so nothing
// is left that only the passage of real time could make runnable.
//
// # Determinism
//
// Ids come from the random import, time from clock_now, and the host backs
// WASI's clocks and random_get (which seed the Go runtime: map order,
// select choice) with the same services. With one thread, no preemption
// and no timers, the schedule is a function of the inputs, so the same
// sequence of export calls with the same import answers produces the same
// imports, byte for byte.
package main
