package runtime

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// epochConn is a Conn holding only the tree's epoch, recording its calls.
type epochConn struct {
	epoch       any
	rows        [][]any // if set, the query's rows instead of epoch's one
	inTx        bool
	beginErr    error
	queryErr    error
	rollbackErr error
	calls       []string
}

func (c *epochConn) Begin() error {
	c.calls = append(c.calls, "begin")
	if c.beginErr != nil {
		return c.beginErr
	}
	c.inTx = true
	return nil
}

func (c *epochConn) Exec(string, []any) (int64, error) {
	c.calls = append(c.calls, "exec")
	return 0, errors.New("exec: not here")
}

func (c *epochConn) Query(q string, _ []any) (*storage.Rows, error) {
	c.calls = append(c.calls, "query "+q)
	if !c.inTx {
		return nil, errors.New("query: no transaction is open")
	}
	if c.queryErr != nil {
		return nil, c.queryErr
	}
	if c.rows != nil {
		return &storage.Rows{Columns: []string{"epoch"}, Values: c.rows}, nil
	}
	return &storage.Rows{Columns: []string{"epoch"}, Values: [][]any{{c.epoch}}}, nil
}

func (c *epochConn) Commit() error {
	c.calls = append(c.calls, "commit")
	c.inTx = false
	return nil
}

func (c *epochConn) Rollback() error {
	c.calls = append(c.calls, "rollback")
	c.inTx = false
	return c.rollbackErr
}

func (c *epochConn) InTx() bool { return c.inTx }

func TestFence(t *testing.T) {
	const read = "query SELECT epoch FROM tree"
	req := func(epoch int64) abi.EgressRequest {
		return abi.EgressRequest{Kind: abi.EgressModel, Epoch: epoch, HasEpoch: true}
	}
	check := func(c *epochConn, r abi.EgressRequest) string {
		g := &Guest{opts: Options{Conn: c}}
		return g.fence(r)
	}

	// Between the guest's transactions: a transaction of its own, rolled back.
	c := &epochConn{epoch: int64(3)}
	require.Empty(t, check(c, req(3)))
	require.Equal(t, []string{"begin", read, "rollback"}, c.calls)
	require.False(t, c.inTx)

	c = &epochConn{epoch: int64(4)}
	msg := check(c, req(3))
	require.Equal(t, "fenced: a newer instance owns this tree (its epoch 4, this instance's 3)", msg)
	require.Equal(t, []string{"begin", read, "rollback"}, c.calls)

	// Inside the guest's open transaction: read there, leave it open.
	c = &epochConn{epoch: int64(3), inTx: true}
	require.Empty(t, check(c, req(3)))
	require.Equal(t, []string{read}, c.calls)
	require.True(t, c.inTx, "the guest's transaction stays open")
	c = &epochConn{epoch: int64(5), inTx: true}
	require.Contains(t, check(c, req(3)), "fenced: a newer instance owns this tree")
	require.True(t, c.inTx)

	// No epoch yet: refused without reading.
	c = &epochConn{epoch: int64(3)}
	require.Equal(t, "fenced: this instance holds no epoch yet", check(c, req(abi.NoEpoch)))
	require.Empty(t, c.calls)

	// No epoch on the wire (an older guest or host): unchecked.
	c = &epochConn{epoch: int64(3)}
	require.Empty(t, check(c, abi.EgressRequest{Kind: abi.EgressModel}))
	require.Empty(t, c.calls)

	// An epoch that cannot be read refuses: fail closed.
	c = &epochConn{beginErr: &storage.Error{Code: 5, Msg: "database is locked"}}
	require.Contains(t, check(c, req(3)), "fenced: the tree's epoch could not be read")
	require.Equal(t, []string{"begin"}, c.calls)
	c = &epochConn{queryErr: errors.New("disk I/O error")}
	require.Contains(t, check(c, req(3)), "disk I/O error")
	require.Equal(t, []string{"begin", read, "rollback"}, c.calls, "rolled back after a failed read")
	c = &epochConn{epoch: "two"}
	require.Contains(t, check(c, req(3)), "is no integer")
	c = &epochConn{rows: [][]any{{int64(3)}, {int64(3)}}}
	require.Contains(t, check(c, req(3)), "2 rows in table tree", "one tree, one epoch: anything else is unreadable")
	// The read's transaction must end: a rollback that fails leaves it
	// unknown, so the request is refused though the epoch matched.
	c = &epochConn{epoch: int64(3), rollbackErr: errors.New("rollback: disk I/O error")}
	require.Contains(t, check(c, req(3)), "fenced: the tree's epoch could not be read: rollback: disk I/O error")

	// The instance holds the tree's epoch only if it is that very epoch:
	// one the tree does not hold, older or not, refuses.
	c = &epochConn{epoch: int64(2)}
	require.Equal(t, "fenced: a newer instance owns this tree (its epoch 2, this instance's 3)", check(c, req(3)))
}

// cancelOnly is a Services that records CancelEgress; nothing else is used.
type cancelOnly struct {
	Services
	cancelled []uint64
}

func (s *cancelOnly) CancelEgress(id uint64) { s.cancelled = append(s.cancelled, id) }

// A refused request the guest cancels before its end is delivered gets no
// end (egress_cancel: nothing more for id), and the Services, which never
// started it, hear of no cancel; other cancels pass through.
func TestCancelOfFencedEgress(t *testing.T) {
	s := &cancelOnly{}
	g := &Guest{opts: Options{Conn: &epochConn{}, Services: s}, fenced: []fencedEgress{{id: 1, msg: "a"}, {id: 2, msg: "b"}, {id: 3, msg: "c"}}}
	var cancel hostFn
	for _, h := range hostFns {
		if h.name == abi.ImportEgressCancel {
			cancel = h
		}
	}
	cancel.fn(g, t.Context(), nil, []uint64{2})
	require.Equal(t, []fencedEgress{{id: 1, msg: "a"}, {id: 3, msg: "c"}}, g.fenced)
	require.Empty(t, s.cancelled)
	cancel.fn(g, t.Context(), nil, []uint64{9})
	require.Equal(t, []uint64{9}, s.cancelled)
	require.Len(t, g.fenced, 2)
}
