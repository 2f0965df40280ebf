// Package durableobject is the Cloudflare Durable Object host for one
// session tree: core and recovery running in a Go js/wasm instance that a
// thin JS class (shim.js) starts once per object. Beside it, sql.mjs runs
// each statement's round trip in one Go→JS call (and txSync, Go's
// transactions), body.mjs reads request bodies at the API's cap (max_body)
// for the object and the front Worker, and ended.mjs answers a request Go
// never will once the program has ended; all three import nothing, and
// this package's js/wasm tests evaluate them as they are.
//
// What it owns, mapped to core.Host (DESIGN §4):
//   - storage: DB runs core's callback-shaped transactions on
//     ctx.storage.transactionSync and each statement on ctx.storage.sql.exec.
//     SQL failures reach Go as a panic of a js.Error carrying only text; they
//     are recovered and mapped at once to *storage.Error with
//     storage.CodeFromText, so core classifies them by code as on every host.
//   - clock: Go's time, which on js/wasm is Date.now and setTimeout.
//   - ids: crypto/rand (crypto.getRandomValues on js/wasm).
//   - the tree's wake-up: the object's alarm (ctx.storage.setAlarm). The
//     alarm handler sweeps, holds the object while the turns it resumed run
//     (bounded), and re-arms as its last act (DESIGN §4 rule 2). It never
//     throws (a thrown alarm is retried a few times and then lost) but to
//     give up a spent object (below). A failed
//     sweep re-arms on the wake schedule (retry.Wake), one step per failed
//     wake, and the last re-arm waits that out too (core's Rearm), so a
//     storage outage costs an alarm a minute, not one a second. The
//     tree's delete deletes the alarm for good: the Alarm arms nothing
//     afterwards, and a handler the delete met mid-hold neither sweeps
//     nor re-arms, so the deleted object's storage stays empty.
//
// What it serves (the contract with the front Worker): requests carry
// x-revenant-tree (the root id the object holds) and x-revenant-principal
// (the caller the front authenticated); the object trusts both, since only
// the front reaches it. POST /v1/sessions creates the tree's root session
// owned by that principal; DELETE /v1/sessions/{root} deletes the tree
// (both through api.Directory over the one tree); every other
// /v1/sessions/{id}/… route is api.TreeHandler's, once the principal owns
// the tree (else 404). Egress (the model, and http_request and webhook
// tools under tools/web's policy, Egress.WithTransport) is Fetch, an
// httpmsg.Doer over the Workers fetch with an AbortController per request.
//
// Invariants (DESIGN §13):
//   - One Go instance per object: package state is per object. The shim
//     never shares a runtime between objects.
//   - Every entry point the shim calls (boot, fetch, alarm) recovers panics:
//     a panic escaping a js.FuncOf ends the Go program. If it ends anyway,
//     the shim aborts the object so the next event gets a fresh one; after
//     a panic that reached a request's entry point (answered 500) the shim
//     aborts it too, once no request's answer is pending (refusing unread,
//     for the front to send again, every request that reaches it until
//     then) and the storage's pending writes are confirmed (storage.sync).
//     Each of the two waits lasts at most the tree's interrupt_grace and
//     5 s, but never less than 10 s nor more than 25 s (giveUpWait: an
//     interrupt waits that grace for its turn, a delete as long, and at
//     least 5 s, for the tree's turns), so the abort comes at the latest
//     twice that after the give-up; past the first it cuts the answers
//     still pending (the front answers a cut write 503 and sends a cut
//     read again): one answer that never returns must not keep the tree
//     refused for good.
//     A delete whose turns do not stop within that wait (one ignores its
//     cancellation and may still write) deletes nothing: the object gives
//     itself up and answers 503, and the client's delete again reaches a
//     fresh object, which deletes the tree (deleteTree). After an
//     alarm's recovered panic, or a program that ended during the alarm,
//     it aborts the object from the alarm handler, the one throw it makes:
//     workerd retries the alarm on a fresh object, whose boot re-arms
//     from storage. A panic in
//     one of core/api's handlers is answered 500 there, as on every host,
//     and then told to the object (api's Panicked hook: routePanicked),
//     which gives itself up the same way, first setting again an alarm a
//     delete the panic cut had cleared. Go tells the shim as it gives up
//     (bridge.gaveUp), so a panic in an event stream already answered
//     aborts the object too, once no other request's answer is pending
//     (within the same bound).
//   - setAlarm, deleteAlarm and deleteAll are never made inside another
//     goroutine's open transactionSync (DB.outside): a rollback would undo
//     them.
//   - Nothing inside a transactionSync callback waits on the event loop: the
//     callback runs core's function, which only runs SQL.
//   - Entry points that wait (boot, fetch, alarm) return a JS Promise whose
//     work runs in a goroutine; no synchronous callback blocks.
//   - The object stores its own tree id (an alarm-woken object has no
//     ctx.id.name on workerd); the shim keeps it in ctx.storage.
//
// It imports core, core/api and recovery, never host/, wasm/ or ncruces.
// All code but this file builds only for GOOS=js GOARCH=wasm.
package durableobject
