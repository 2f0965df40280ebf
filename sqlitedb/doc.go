// Package sqlitedb implements core's storage contract (core/storage) on a
// local SQLite file with github.com/ncruces/go-sqlite3.
//
// It is a leaf: it imports nothing of revenant but core/storage, so host/
// (the local server's trees and index) and wasm/ (the connection a wazero
// host owns for its guest, the simulator's) both use it without importing
// each other (internal/archtest keeps it so).
//
// One DB is one connection, used by one goroutine at a time: Tx takes a mutex
// for the whole transaction, which is how writes to a tree are serialized in
// process. Two DBs on one file (a zombie instance and its successor, or a
// test's BUSY holder) are separate connections and meet SQLite's own locking.
//
// The settings live here and nowhere else: WAL, read back after setting it
// (a filesystem that cannot do WAL fails Open instead of silently running in
// another mode); synchronous=FULL, so a row committed before a side effect
// survives power loss and not only SIGKILL; a busy timeout; foreign keys on.
// Options change only what the simulator needs (wasm/sim): synchronous=OFF
// (its kills are process deaths, not power loss), no busy wait, a fault VFS,
// and hooks that hear every BEGIN and every commit with the rows it changed.
// Transactions are BEGIN IMMEDIATE, so a writer learns of a competing writer
// at BEGIN (where retrying is cheap) rather than at its first write.
//
// Failures carry SQLite's extended code as a storage.Error (the ncruces
// value stays reachable with errors.Is), so core classifies them by code;
// a failed BEGIN or COMMIT leaves no transaction open, so core may rerun
// the whole transaction. Options.VFS opens the file through a registered
// VFS: tests and the simulator inject storage faults that way
// (internal/faultvfs).
//
// Conn is the same connection with explicit transactions, for a host whose
// guest drives BEGIN and COMMIT through imports (wasm/runtime's Conn). Its
// Close is a process death: SQLite rolls back what was left open.
package sqlitedb
