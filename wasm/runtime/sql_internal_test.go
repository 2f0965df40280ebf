package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// brokenConn fails every call with err.
type brokenConn struct{ err error }

func (c brokenConn) Begin() error                               { return c.err }
func (c brokenConn) Exec(string, []any) (int64, error)          { return 0, c.err }
func (c brokenConn) Query(string, []any) (*storage.Rows, error) { return nil, c.err }
func (c brokenConn) Commit() error                              { return c.err }
func (c brokenConn) Rollback() error                            { return c.err }
func (c brokenConn) InTx() bool                                 { return true }

// Each SQL import answers the Conn's failure as the error tag and an
// SQLError with its extended code (docs/abi.md, SQL results), so a guest
// classifies each by code; the rollback's too, though the guest's DB
// ignores that one today.
func TestSQLImportsAnswerTheConnsFailure(t *testing.T) {
	fail := &storage.Error{Code: storage.CodeIOErr | 4<<8, Msg: "disk I/O error"}
	c := brokenConn{fail}
	st := abi.Statement{Query: "SELECT 1"}
	for name, res := range map[string][]byte{
		"begin": sqlBegin(c), "exec": sqlExec(c, st), "query": sqlQuery(c, st),
		"commit": sqlCommit(c), "rollback": sqlRollback(c),
	} {
		require.NotEmpty(t, res, name)
		require.Equal(t, abi.ResultError, res[0], name)
		se, err := abi.DecodeSQLError(res[1:])
		require.NoError(t, err, name)
		require.Equal(t, int64(fail.Code), se.Code, name)
		require.Contains(t, se.Message, "disk I/O error", name)
	}
	for name, res := range map[string][]byte{"begin": sqlBegin(cannedConn{}), "commit": sqlCommit(cannedConn{}), "rollback": sqlRollback(cannedConn{})} {
		require.Nil(t, res, "%s: ok, nothing to take", name)
	}
}
