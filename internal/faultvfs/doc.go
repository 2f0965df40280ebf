// Package faultvfs is an SQLite VFS for tests and the simulator: the
// ncruces OS VFS with writes that fail on demand, the way a full disk or a
// failing device makes them fail.
//
// A Fault decides which writes fail: the next n of them, or every write
// while a clock (the test's fake clock, the simulator's virtual one) reads
// inside a window, with SQLITE_FULL or an IOERR extended code. It can also
// make a commit durable and still report it failed (the "late IOERR" a host
// may return after its COMMIT already reached the disk). Register puts a
// Fault under a VFS name; sqlitedb opens a database through it with
// Options.VFS, so the code under test runs its real SQL on a real file.
//
// Everything that is not a write is forwarded to the OS VFS, including the
// optional file interfaces (shared memory, locking state, memory mapping,
// file controls), so WAL, its shared-memory index and cross-connection
// locking behave exactly as without the wrapper: a second connection that
// holds BEGIN IMMEDIATE still makes the first one meet SQLITE_BUSY.
//
// Only tests and the simulator import it; it imports ncruces and the
// standard library.
package faultvfs
