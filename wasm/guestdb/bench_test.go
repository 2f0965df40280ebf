package guestdb_test

import (
	"testing"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/guestdb"
)

// cannedSQL answers every query with the host's encoding of SELECT 1's
// rows, copied as the guest's result import copies it: what is left is the
// guest's own share of an SQL round trip through the ABI.
type cannedSQL struct{ one []byte }

func newCanned(tb testing.TB) cannedSQL {
	body, err := abi.Rows{Columns: []string{"1"}, Values: [][]any{{int64(1)}}}.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return cannedSQL{one: append([]byte{abi.ResultOK}, body...)}
}

func (cannedSQL) Begin() []byte         { return nil }
func (cannedSQL) Exec([]byte) []byte    { return nil }
func (c cannedSQL) Query([]byte) []byte { return append([]byte(nil), c.one...) }
func (cannedSQL) Commit() []byte        { return nil }
func (cannedSQL) Rollback() []byte      { return nil }

// BenchmarkGuestStatement is the guest's code per statement of
// revenant_diag_sql (encode the Statement, take and decode the Rows, check
// them), natively: its allocs/op is what each statement costs the guest's
// allocator and GC.
func BenchmarkGuestStatement(b *testing.B) {
	d := guestdb.New(newCanned(b), nil)
	const batch = 100
	b.ReportAllocs()
	for b.Loop() {
		if err := d.SelectOnes(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/stmt")
}
