// Package host runs many trees on one machine, the way Cloudflare runs many
// Durable Objects: one SQLite file per tree, at most one instance per
// active tree, a durable wake-up per tree, idle eviction and a cap on open
// trees. The local server (cmd/revenant) and the simulator use it.
//
// Two backends run the instances (backend, instance.go):
//   - in process (the default): a core.Instance per tree; Host implements
//     api.Trees for core/api's handler.
//   - guest (Config.Guest, guest.go): a WebAssembly guest (wasm/guest) per
//     tree, started by a GuestRuntime on a database connection the host
//     owns, which outlives guest instances. host/ defines GuestRuntime and
//     imports nothing under wasm/: the wazero implementation is
//     wasm/backend, wired in by cmd/revenant. The guest arms its wake-up
//     through the host, which stores the row before the import returns.
//     NewGuestHandler serves the API: the host answers the routes about
//     many trees (list, create, delete) and forwards the rest to the
//     tree's guest, with core/api's responses either way.
//
// Everything else below holds for both.
//
// Layout of the data directory:
//
//	index.db        the host's index: trees(id, principal, created_at),
//	                wakeups(tree_id, at) and create_keys(principal, key,
//	                tree_id, digest), a create's Idempotency-Key, written
//	                with its tree's row; its own schema, forward-only
//	trees/<id>.db   one tree's database (core's schema), with -wal and -shm
//
// The directories it creates are 0700 and every database file 0600, for
// the server's user only (sqlitedb creates them so): they hold principals'
// data. Files that exist keep their modes.
//
// What it owns: which trees exist (the index), which tree files are open,
// booting an instance on a tree (recovery.Boot: migrations, a new epoch, the
// sweep, the re-arm), delivering each tree's wake-up (recovery.Wake on the
// running instance, GuestTree.Wake on a guest, or a boot), closing idle
// instances, and deleting trees. The waker (wake.go) is the one component
// that delivers wake-ups, for both backends: a guest runtime only reports
// the guest's arms, so no wake-up is delivered twice or by something that
// dies with an evicted tree.
// What happens inside a tree — claims, executions, fences, the claim lock
// and the wake rules' ordering (DESIGN §4 rules 1–3) — is core's and
// recovery's; host only stores and delivers wake-ups.
//
// Invariants:
//   - At most one instance per tree: boots, evictions and deletes of a tree
//     are serialized, and concurrent callers share one boot.
//   - A wake-up row exists whenever the tree armed one, and is deleted only
//     after a delivery has run to its end (sweep and re-arm) without arming
//     again. A delivered wake-up is used up, but a crash during its delivery
//     leaves the row, so the next Open boots the tree.
//   - Open boots exactly the trees that have a wake-up row (every claim arms
//     one), at most BootConcurrency at a time and in the background; it never
//     opens another tree's file. A boot that fails keeps the row and retries
//     with backoff; so does a wake-up whose boot, or whose running tree's
//     sweep, panics (logged with its stack: no HTTP handler is there to
//     recover it, and the process and every other tree serve on; the
//     running tree is no longer counted in use). Boot never waits on
//     executions.
//   - Eviction and Close are graceful (core.Instance.Close: shutdown recorded,
//     claims kept) and never remove a wake-up row.
//   - Eviction closes only a tree that nothing uses: owned by no operation
//     (boot, eviction, delete), serving no request (entry.inflight: a
//     guest's request, an in-process Get whose context is not done yet,
//     event streams included, or a wake-up being delivered to it) and
//     running no execution (instance.idle).
//     The idle eviction closes such a tree once it is unused for
//     IdleTimeout; the cap closes one at once (below).
//   - At most Config.MaxOpenTrees trees are in the host's table (open, or
//     being booted, closed or deleted), not counting those a delete found
//     not open (they hold no instance, and never cost an open tree its
//     place). Opening one more — Create, Get, a
//     guest's request, a wake-up's boot; never a use of a tree already
//     open — first closes the least recently used tree that eviction may
//     close (makeRoom), whatever its idle time, and looks again; if none
//     may be closed it fails at once with ErrTooManyOpen (503 unavailable,
//     Retry-After), never waiting. A wake-up refused so keeps its row and
//     retries with backoff, so a claim's turn still resumes; a tree closed
//     for the cap keeps its wake-up like any evicted one. Default 64: an
//     open tree holds 3 file handles and, as a guest, about 7 MB.
//   - A tree id is 1–64 ASCII letters, digits, '-' or '_' (ValidTreeID) before
//     it ever becomes a path.
//
// What it must not do: import anything under wasm/ (the runtime comes in
// through GuestRuntime); hold its own lock while calling into core or doing
// I/O; call time.Now or time.Sleep for anything a test must control (time
// and timers come from Config.Clock; the eviction loop can be off and
// stepped with EvictIdle); touch the schema or rows of a tree's database.
//
// Limits: in process, eviction sees a request only through the context
// its Get was given (core/api gives the request's): a caller that keeps
// using the instance after that context ends, or passes one that never
// ends (context.Background, which holds nothing), is not seen. A guest
// serving a request (an event stream too) is not evicted. Otherwise a
// guest tree is evicted as an in-process one is, once no execution runs in
// it (the revenant_idle export, ABI 1.1); a guest older than 1.1 counts as
// busy while its wake-up is armed. The cap counts trees, not bytes: a
// tree whose instance grew large counts as one.
package host
