package runtime

import (
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// The SQL imports' bodies, apart from wasm memory and interposition: each
// runs one call on the host-owned Conn and returns the import's result
// bytes (docs/abi.md, SQL results), which the guest then takes through the
// result import. Being plain functions, they also run natively under the
// guest's DB code (wasm/guestdb) in the storage conformance test.

func sqlBegin(c Conn) []byte { return sqlResult(nil, c.Begin()) }

func sqlExec(c Conn, st abi.Statement) []byte {
	n, err := c.Exec(st.Query, st.Args)
	var e abi.Encoder
	e.Byte(abi.ResultOK)
	e.Varint(n)
	return sqlResult(e.Bytes(), err)
}

func sqlQuery(c Conn, st abi.Statement) []byte {
	rows, err := c.Query(st.Query, st.Args)
	var out []byte
	if err == nil {
		var body []byte
		body, err = abi.Rows{Columns: rows.Columns, Values: rows.Values}.Encode()
		out = append([]byte{abi.ResultOK}, body...)
	}
	return sqlResult(out, err)
}

func sqlCommit(c Conn) []byte { return sqlResult(nil, c.Commit()) }

func sqlRollback(c Conn) []byte { return sqlResult(nil, c.Rollback()) }

// decodeStatement reads the statement a guest passed; a malformed one is
// the guest's bug, so it panics and the call fails.
func decodeStatement(b []byte) abi.Statement {
	st, err := abi.DecodeStatement(b)
	if err != nil {
		panic(fmt.Errorf("sql statement: %w", err))
	}
	return st
}

// wakeArmCode is wake_arm_checked's answer for err: 0 when the wake-up
// was stored, its storage code when storage refused it (the guest retries
// a transient one like any storage failure), abi.SQLCodeClosed when the
// tree's storage is closed (storage.ErrClosed: the tree was deleted, or
// the host is stopping), which the SQL imports answer on the tree's closed
// connection too, and SQLITE_ERROR otherwise.
func wakeArmCode(err error) int32 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, storage.ErrClosed):
		return int32(abi.SQLCodeClosed)
	}
	if c := storage.CodeOf(err); c != 0 {
		return int32(c)
	}
	return int32(storage.CodeError)
}

// sqlResult is an SQL import's result: ok (nil: success, nothing to take),
// or for err the error tag and an SQLError carrying its extended code, so
// the guest classifies it by code.
func sqlResult(ok []byte, err error) []byte {
	if err == nil {
		return ok
	}
	se := abi.SQLError{Message: err.Error()}
	switch {
	case errors.Is(err, storage.ErrClosed):
		se.Code = abi.SQLCodeClosed
	default:
		se.Code = int64(storage.CodeOf(err))
	}
	return append([]byte{abi.ResultError}, se.Encode()...)
}
