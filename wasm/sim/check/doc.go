// Package check judges what a run did to a tree: it reads only the tree's
// SQLite database (opened read-only) and the side-effect ledger kept by
// whoever answered the tree's egress, and lists every way they break the
// invariants of DESIGN §14 that exist so far:
//
//   - every admitted prompt ends in exactly one terminal (or one
//     cancellation), turns run one at a time in admission order;
//   - no claim is left at quiescence without runnable work;
//   - nothing of a turn is written, and no tool effect starts, after its
//     interrupt commits (placed by commit position, not only by time); an
//     interrupt answered 200 has ended every prompt admitted before it,
//     and the task turns of the foreground descendants of those turns
//     (children, and a grandchild under a parked child), whether this
//     interrupt or something before it ended them, do no new work after
//     that answer: no step, no tool body, no success; nor do those of a
//     turn a client's reply ended (a cancelled question, a plain reject)
//     after the reply's answer;
//   - resume attempts are counted one by one and never run past the
//     budget: the count past it fails the turn at once, and an open turn
//     goes on only through a counted resume or its scheduled retry;
//   - a non-idempotent tool call takes effect at most once, an idempotent
//     one is applied once per idempotency key, and every effect was
//     announced by its executing record, committed before it, with the
//     same key;
//   - each session's seqs are contiguous from 1;
//   - the projections equal their rebuild from the log (core.Rebuild on a
//     private in-memory copy, never on the judged file), and the log can be
//     replayed at all (a log the projector refuses is listed with the
//     other violations, not returned as the check's error);
//   - the continuation notice is delivered once per resume, never
//     otherwise, and not at all for a resume after the turn's final
//     answer (a step recorded complete without tool calls);
//   - a step recorded complete is never requested again;
//   - text checkpoints follow each other without gaps, and a step cut
//     after its execution died keeps exactly what they kept; one its own
//     execution cut, or one recorded complete, begins with it
//     (cut-keeps-checkpoint);
//   - a zombie never commits (or starts egress) after its successor took a
//     newer epoch: neither a write the ledger saw nor a step write of an
//     execution already replaced, nor an epoch of its own taken over the
//     successor's (a reopen that took the tree back, wasm/sim -reopenrace);
//   - each question is asked once and resolved at most once, only by a
//     client's reply (a response_id the ledger shows sent) or the user's
//     interrupt, never by a kill, shutdown or eviction; every listing the
//     API answered shows exactly the questions asked and not resolved
//     around it; a reply is answered 200 only as the winner (or its
//     repeat with the same body: another body under its response_id is
//     another reply), 409 only naming the winner, 404 never for an asked
//     question;
//     a parked turn writes nothing, is not resumed, and continues (cause
//     resolution) once, only after every question of its park is
//     answered; a turn waiting for an answer, and the prompts queued
//     behind it, are visibly waiting, not lost, and hold no claim;
//     permission requests are judged by the same rules (approved, rejected
//     or cancelled instead of answered or cancelled), and a call that asked
//     for permission is executing, so reaches its receiver, only after an
//     approval of it committed (body-after-approval); an always reply
//     saves an exact rule for each resource it was asked about, and a call
//     whose step completed after that does not ask for them again
//     (always-rule-kept), but for a tool whose ask the operator made
//     final: each of its requests lists its resources as final, an always
//     reply saves no rule for them, and no call of it runs without an
//     approval of its own (final-ask-kept); the questions and requests of children are
//     judged as the root's, listed on the root's path too;
//   - sub-agents: a task call has at most one child (a re-run call
//     re-attaches) and the child runs at most one turn for it; a
//     background child's notice is admitted to its parent exactly once,
//     with its turn's end; every job ends once and has ended at
//     quiescence; no child claim is left without a live job or waiting
//     call naming it, no child is resumed after its job ended, and none
//     is abandoned (failed aborted other than by the budget) while its
//     job runs or its parent's call waits for it; a task turn
//     interrupted says why: user for its parent's turn interrupted, an
//     interrupt of the child itself or its own reply, orphaned only for
//     a foreground parent's turn that ended otherwise (task-end-reason); a
//     foreground call's task blocker is resolved once, by its child's end
//     (or cancelled by the parent's interrupt), and a call settled ok
//     carries the child's final answer; a child that ended before its
//     parent's step parked is resolved by that park's own commit; a child whose job ended is neither
//     continued from a reply nor left waiting for an answer; a turn
//     parked on a child that waits for an answer is visibly waiting (so
//     are the prompts queued behind it), judged once every session's log
//     was read, and only while that question is pending in the log: once
//     it is resolved, the chain must finish;
//   - a prompt a client sent to a child is the child's own: it is not
//     counted as a task turn (nor is the notice of the child's own
//     background child) and resumes like a root's; its parent's
//     interrupt, its task turn's end and the sweep never end it, only an
//     interrupt of the child itself (or a reply that ends the child's
//     turn, cancelling its queue as an interrupt would), and it fails
//     aborted only past its own budget (child-own-prompt-kept);
//   - a root session's turn (or queued prompt) ends as the user's
//     interrupt only for a cause a client gave: an interrupt sent to the
//     session while the prompt was open, or a reply that ended the turn
//     (a cancelled question, a permission rejected without a message; a
//     reject with one is feedback and ends nothing) (interrupt-has-cause);
//   - provider retries (retry.go): an execution with cause retry never
//     starts before the time its session.retry.scheduled@1 named
//     (retry-not-early); each step's retries are numbered from 1 (a step
//     recorded complete starts the count again), never past the tree's
//     retry budget, a turn asleep on its scheduled retry goes on by that
//     retry, never by a counted resume (retry-not-resumed), a claim
//     sleeps only on a retry its own execution scheduled, never on one a
//     turn before it left (retry-owned, seen by the host after every
//     commit), and a turn
//     fails model for retries only once its step was retried the full
//     budget (retry-budget: in a tree whose ledger
//     names a retry policy every model failure counts, since its
//     provider fails only retryably; elsewhere those that say they gave
//     up); a retry is scheduled no further ahead than the longest wait
//     allowed, the schedule's or the provider's capped Retry-After
//     (retry-delay-bounded), and no sooner than the wait a provider's
//     failure asked for (Retry-After, retry-after-ms) after it was
//     answered, the failure found by the mark its message carries, which
//     the retry's reason quotes (retry-honours-hint); with the instance at rest, the wake-up armed,
//     and the last arm of a sweep that ended (the handler's re-arm), are
//     due no later than the earliest retry_at of a sleeping claim and
//     within one wake interval while a claim is not sleeping
//     (wake-before-due, seen by the host through a Probe); and the
//     wake-up is not delivered again and again at one instant, re-armed
//     in the past while nothing progresses (wake-not-hot, seen by the
//     host);
//   - a claim an instance took while serving (a prompt admitted, a reply
//     or a child's end that resolved a parked step's last blocker, a
//     notice admitted) starts its execution there, not at that instance's
//     next wake-up: no execution but a scheduled retry is started by a
//     wake-up delivered to the instance that committed the event that
//     took its claim (its session's latest before it but the admissions
//     of other prompts, which queue behind a claim), when storage refused
//     no write from that event's transaction to the delivery, and
//     reported no commit failed though durable in that stretch unless a
//     timer of the instance's was set at the delivery (a writer waiting
//     for its rerun) (claim-starts-here, startshere.go; the host records
//     the deliveries and who committed what);
//   - a tree a client deleted (delete.go, DeletedTree) is judged by every
//     rule above on its database as it was just before the delete's
//     commit, but for those that hold only at quiescence (Options.Cut: a
//     prompt never ended, a claim or a job left, a resolved park not yet
//     continued); once a DELETE was answered 204, or the delete
//     committed, every request sent after that commit is answered 404,
//     no delivery, egress or emit of the tree starts after it, and no
//     boot after it finds a claim (deleted-stays-gone); a DELETE is
//     answered 204, or 404, only once a delete committed, and one of them
//     ends the client's tries, and another request sent after the first
//     DELETE, or still out when it was sent (one the delete overtook), is
//     answered 404 only once a delete committed too (delete-answer-true);
//     and the final
//     database holds no row of the tree, only the epoch and the schema's
//     version, or is gone (deleted-tree-empty);
//   - every durable event reaches the host's emit exactly once, in commit
//     order, a commit reported failed that was durable (a late IOERR)
//     included; only an instance that died before emitting its last
//     commits may leave them unemitted (when the ledger records emits);
//   - a step whose answer streamed text, recorded complete by an instance
//     that went quiet after (a call into it returned with every goroutine
//     blocked), had a live delta of its reach emit from that instance
//     (deltas-reach-emit: the session was watched there).
//
// The checker is deliberately independent of the code it judges: it
// re-derives everything from the event log with its own decoding, and
// borrows from core only the schema and the projector (for the rebuild),
// which is the very thing that comparison tests. It imports nothing of
// wazero or wasm/: the ledger is defined here so any host (the simulator,
// a crash test, an e2e harness) can produce one.
package check
