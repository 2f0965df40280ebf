//go:build wasip1

package main

import (
	"unsafe"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/guestdb"
)

// db is the guest's storage.DB: wasm/guestdb's, over the SQL imports. All
// of it but the imports lives there, so the storage suite runs against the
// same code natively (wasm/runtime's conformance test).
type db = guestdb.DB

func newDB(onEmit func(event.Event)) *db { return guestdb.New(&sqlImports{}, onEmit) }

// sqlImports is guestdb.SQL over the wasm imports: each call passes its
// statement by address and copies the import's pending result into buf,
// reused from call to call (guestdb.SQL: a result is read before the next
// call, and guestdb.DB makes its calls one at a time, under its mutex).
type sqlImports struct{ buf []byte }

// keepResult bounds the result buffer sqlImports keeps.
const keepResult = 64 << 10

func (s *sqlImports) take(n uint32) []byte {
	if n == 0 {
		return nil
	}
	b := s.buf[:0]
	switch {
	case n > keepResult:
		b = make([]byte, n) // a large result is not kept past its use
	case uint32(cap(s.buf)) < n:
		s.buf = make([]byte, keepResult)
		b = s.buf
	}
	b = b[:n]
	hostResult(unsafe.Pointer(unsafe.SliceData(b)))
	return b
}

func (s *sqlImports) Begin() []byte { return s.take(hostSQLBegin()) }

func (s *sqlImports) Exec(stmt []byte) []byte {
	p, n := bytesPtr(stmt)
	return s.take(hostSQLExec(p, n))
}

func (s *sqlImports) Query(stmt []byte) []byte {
	p, n := bytesPtr(stmt)
	return s.take(hostSQLQuery(p, n))
}

func (s *sqlImports) Commit() []byte { return s.take(hostSQLCommit()) }

func (s *sqlImports) Rollback() []byte { return s.take(hostSQLRollback()) }
