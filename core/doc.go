// Package core is revenant's platform-free runtime for one tree: the event
// log and its projections, sessions, the prompt queue, write-ahead claims,
// executions with their fences, and interrupts.
//
// What core needs from the platform is the Host: transactional SQL on the
// tree's database (core/storage), a clock, the tree's wake-up, and ids. It
// must not import syscall/js, wazero, ncruces or syumai, nor call time.Now,
// time.Sleep or math/rand; a test enforces the imports. That is what lets the
// same code run in process, in a wasip1 guest and in a Durable Object.
//
// Invariants (DESIGN §4–§6, each closing a race of §15):
//   - Work becomes runnable and its claim is written in one transaction; the
//     wake-up is armed before that transaction while the tree's claim lock is
//     held (neither host's wake-up commits with the tree's SQL).
//   - Every write of an execution checks, in its transaction, that the claim
//     still names the execution and that this instance's epoch is current;
//     otherwise it fails with ErrFenced and the execution stops.
//   - An interrupt is decided and committed under the claim lock and the call
//     returns only after the commit.
//   - Live subscribers hear of events only after their transaction commits.
//   - A transient storage failure (DESIGN §8: FULL, BUSY, LOCKED, IOERR,
//     classified by code in core/storage) reruns the whole transaction, with
//     the same event ids and timestamp, on the write schedule of core/retry;
//     a rerun that finds its events stored counts as committed. A turn whose
//     writes outlast that schedule ends failed{type:"storage"} on the
//     settlement schedule; storage that outlasts that too makes the instance
//     read-only until a write succeeds. Waits use the host clock, end when
//     the instance stops, and let go of the claim lock.
//   - Durable waits (DESIGN §9, blocker.go): a step whose calls wait for
//     people is parked in one transaction with the claim's release; a
//     reply is one first-response-wins compare-and-set, and the reply that
//     resolves the step's last blocker takes the claim and arms the wake-up
//     in its own transaction. Each blocker kind plugs in a versioned Adapter
//     (question@1 in question.go) that judges replies and makes the call's
//     continuation. A foreground sub-agent is a blocker too (task@1 in
//     taskwait.go), resolved by the child's turn terminal, never by a reply.
//     Only a reply or a user's interrupt cancels a blocker, never a stop, an
//     eviction or a kill.
//
// Every statement on the claims table is a named operation of claim.go, and
// the states the projections store are the constants of state.go.
//
// Policy about dead executions (resume budget, claim age, orphaned children)
// lives in package recovery; core applies its decisions atomically.
package core
