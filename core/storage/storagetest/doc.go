// Package storagetest is the conformance suite of the storage contract
// (core/storage): every implementation of storage.DB runs it from its own
// test, so the contract means the same thing on every host.
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t conform.T) storage.DB { return open(t) })
//	}
//
// The suite states the contract's invariants as tests: Tx commits when fn
// returns nil and rolls back when it returns an error (returned unchanged)
// or panics (the panic goes on); values round-trip with their SQLite types;
// Exec counts changed rows; failures carry SQLite codes, transient or
// permanent as storage.IsTransient says; a cancelled context runs nothing;
// a DB stays usable after any failure.
//
// What not every host can provoke is an optional capability the suite finds
// by type assertion on the DB under test, skipping its tests otherwise:
// Rivals (a second connection, for BUSY, a busy wait the context ends, and
// a transaction's read that still holds when it writes, which core's epoch
// and claim fences rely on),
// CommitFaults (a COMMIT that fails and leaves its transaction open, which
// the DB must roll back before the next one) and Closer. The suite needs no
// file path, so a host without files (the Durable Object bridge) runs it
// too. A host that knowingly departs from one test names it in a Skip,
// with the reason; a Skip that names no test fails the run, so none
// outlives the gap it excused.
//
// Nested transactions are outside the contract ("transactions never
// nest"): the implementations serialize Tx with a lock, so a nested Tx
// would block forever, and the suite does not call one.
//
// The suite takes a conform.T, so a test can run it on a conform.Recorder
// against a deliberately broken DB and check which tests catch it.
//
// It imports core/storage, core/conform, testify and the standard library:
// never a host package.
package storagetest
