package runtime

import "github.com/revenantrt/revenant/core/storage"

// cannedConn answers every query with SELECT 1's row.
type cannedConn struct{}

func (cannedConn) Begin() error                      { return nil }
func (cannedConn) Exec(string, []any) (int64, error) { return 0, nil }
func (cannedConn) Query(string, []any) (*storage.Rows, error) {
	return &storage.Rows{Columns: []string{"1"}, Values: [][]any{{int64(1)}}}, nil
}
func (cannedConn) Commit() error   { return nil }
func (cannedConn) Rollback() error { return nil }
func (cannedConn) InTx() bool      { return false }

// nopServices are Services that do nothing, at a fixed time.
type nopServices struct{}

func (nopServices) Now() int64                        { return 1_700_000_000_000 }
func (nopServices) SetTimer(uint64, int64)            {}
func (nopServices) ClearTimer(uint64)                 {}
func (nopServices) ArmWake(int64) error               { return nil }
func (nopServices) ClearWake()                        {}
func (nopServices) StartEgress(uint64, EgressRequest) {}
func (nopServices) CancelEgress(uint64)               {}
func (nopServices) Emit(Emitted)                      {}
func (nopServices) Respond(uint64, ResponsePart)      {}
func (nopServices) Random(p []byte)                   { clear(p) }
