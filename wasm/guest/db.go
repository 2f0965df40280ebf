//go:build wasip1

package main

import (
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/guestdb"
)

// db is the guest's storage.DB: wasm/guestdb's, over the SQL imports. All
// of it but the imports lives there, so the storage suite runs against the
// same code natively (wasm/runtime's conformance test).
type db = guestdb.DB

func newDB(onEmit func(event.Event)) *db { return guestdb.New(sqlImports{}, onEmit) }

// sqlImports is guestdb.SQL over the wasm imports: each call passes its
// statement by address and copies the import's pending result.
type sqlImports struct{}

func (sqlImports) Begin() []byte { return takeResult(hostSQLBegin()) }

func (sqlImports) Exec(stmt []byte) []byte {
	p, n := bytesPtr(stmt)
	return takeResult(hostSQLExec(p, n))
}

func (sqlImports) Query(stmt []byte) []byte {
	p, n := bytesPtr(stmt)
	return takeResult(hostSQLQuery(p, n))
}

func (sqlImports) Commit() []byte { return takeResult(hostSQLCommit()) }

func (sqlImports) Rollback() []byte { return takeResult(hostSQLRollback()) }
