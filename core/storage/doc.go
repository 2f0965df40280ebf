// Package storage is the contract between revenant's core and the SQL database
// of one tree: callback-shaped transactions, a small value model, and storage
// errors identified by SQLite result code.
//
// It is the whole of what core needs from a database. Hosts implement DB over
// whatever they own: ncruces/go-sqlite3 in process (sqlitedb), the
// Durable Object's ctx.storage.sql inside transactionSync, or host imports for
// a wasip1 guest. It must not import any host package (syscall/js, wazero,
// ncruces, syumai); a test in core enforces that.
//
// Invariants every implementation keeps:
//   - Tx runs fn inside one transaction and commits only if fn returns nil.
//     Transactions never nest and nothing inside fn may block on I/O other
//     than the statements themselves (DO storage forbids BEGIN/COMMIT, so the
//     shape is a callback, never Begin/Commit methods).
//   - Values crossing the contract are nil, int64, float64, string or []byte.
//     Timestamps are int64 milliseconds chosen by Go, never SQL defaults.
//   - A failed statement or commit returns an error whose SQLite code can be
//     read with CodeOf; transient failures (FULL, BUSY, LOCKED, IOERR) keep
//     their codes so callers may retry the whole transaction.
package storage
