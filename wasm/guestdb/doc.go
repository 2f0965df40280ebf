// Package guestdb is the guest's storage.DB (wasm/guest): core's storage
// contract over the SQL imports of docs/abi.md, whose host owns the
// connection. It builds natively as well as for wasip1, so the storage
// conformance suite (core/storage/storagetest) runs against this very code
// from wasm/runtime's tests, with the runtime's import bodies behind SQL.
//
// It owns:
//   - the transaction's shape: BEGIN; fn; COMMIT; ROLLBACK after any
//     failure, a failed COMMIT included (DESIGN §8: a BUSY commit leaves the
//     transaction open);
//   - the wire form of statements, rows and errors on the guest's side,
//     errors turned back into *storage.Error by their extended code, so
//     core classifies them by code;
//   - emit bookkeeping: events a transaction appended reach the emit
//     callback after its commit, in commit order, once; those of a COMMIT
//     reported failed (maybe a late IOERR) are settled at the start of the
//     next transaction (docs/abi.md, Emit).
//
// It imports core/event, core/storage and wasm/abi only: no wasm imports
// (those are wasm/guest's, behind SQL) and no host.
package guestdb
