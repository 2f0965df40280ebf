package guestdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/guestdb"
)

// The storage contract itself is checked by the conformance suite in
// wasm/runtime (over the runtime's real imports); these tests cover the
// emit bookkeeping, which the suite cannot see, against a scripted host.

// scriptedSQL is a host whose events table is a set of ids: a commit
// stores the transaction's events unless told it fails before the disk;
// the next commit may be reported failed all the same (a late IOERR).
type scriptedSQL struct {
	stored  map[string]bool
	staged  []string // ids the open transaction appended
	commit  commitOutcome
	readErr bool // the next query fails with IOERR
}

type commitOutcome int

const (
	commitOK   commitOutcome = iota
	commitLate               // durable, reported failed
	commitLost               // failed before the disk
)

func newScripted() *scriptedSQL { return &scriptedSQL{stored: map[string]bool{}} }

func sqlErr(code storage.Code) []byte {
	return append([]byte{abi.ResultError}, abi.SQLError{Code: int64(code), Message: "scripted"}.Encode()...)
}

func (s *scriptedSQL) Begin() []byte { s.staged = nil; return nil }

func (s *scriptedSQL) Exec(stmt []byte) []byte {
	st, err := abi.DecodeStatement(stmt)
	if err != nil {
		panic(err)
	}
	s.staged = append(s.staged, st.Args[0].(string))
	var e abi.Encoder
	e.Byte(abi.ResultOK)
	e.Varint(1)
	return e.Bytes()
}

// Query answers the settling read, SELECT 1 FROM events WHERE id = ?.
func (s *scriptedSQL) Query(stmt []byte) []byte {
	if s.readErr {
		s.readErr = false
		return sqlErr(storage.CodeIOErr)
	}
	st, err := abi.DecodeStatement(stmt)
	if err != nil {
		panic(err)
	}
	rows := abi.Rows{Columns: []string{"1"}}
	if s.stored[st.Args[0].(string)] {
		rows.Values = [][]any{{int64(1)}}
	}
	b, err := rows.Encode()
	if err != nil {
		panic(err)
	}
	return append([]byte{abi.ResultOK}, b...)
}

func (s *scriptedSQL) Commit() []byte {
	outcome := s.commit
	s.commit = commitOK
	if outcome != commitLost {
		for _, id := range s.staged {
			s.stored[id] = true
		}
	}
	if outcome == commitOK {
		return nil
	}
	return sqlErr(storage.CodeIOErr | 12<<8) // IOERR_FSYNC
}

func (s *scriptedSQL) Rollback() []byte { s.staged = nil; return nil }

// appendEvents is a transaction that appends events with these ids, as
// core does: a row per event, each through the commit hook.
func appendEvents(d *guestdb.DB, ids ...string) error {
	return d.Tx(context.Background(), func(tx storage.Tx) error {
		for _, id := range ids {
			if _, err := tx.Exec(`INSERT INTO events (id) VALUES (?)`, id); err != nil {
				return err
			}
			if err := d.Hook(tx, event.Event{ID: id}); err != nil {
				return err
			}
		}
		return nil
	})
}

type emitted struct{ ids []string }

func (e *emitted) emit(ev event.Event) { e.ids = append(e.ids, ev.ID) }

func TestCommittedEventsAreEmittedAfterTheCommitInOrder(t *testing.T) {
	sql, out := newScripted(), &emitted{}
	d := guestdb.New(sql, out.emit)
	require.NoError(t, appendEvents(d, "a", "b"))
	assert.Equal(t, []string{"a", "b"}, out.ids)

	failing := errors.New("fn failed")
	err := d.Tx(context.Background(), func(tx storage.Tx) error {
		require.NoError(t, d.Hook(tx, event.Event{ID: "never"}))
		return failing
	})
	require.ErrorIs(t, err, failing)
	require.NoError(t, appendEvents(d, "c"))
	assert.Equal(t, []string{"a", "b", "c"}, out.ids, "a failed transaction's events are never emitted")
}

func TestALateIOErrCommitIsEmittedFirstInTheNextTransaction(t *testing.T) {
	sql, out := newScripted(), &emitted{}
	d := guestdb.New(sql, out.emit)
	sql.commit = commitLate
	err := appendEvents(d, "a", "b")
	require.Error(t, err)
	assert.Equal(t, storage.CodeIOErr, storage.CodeOf(err)&0xff, "the commit's failure keeps its code")
	assert.Empty(t, out.ids, "nothing is emitted before it is known stored")

	// Core's rerun finds them stored and appends nothing more.
	require.NoError(t, appendEvents(d))
	assert.Equal(t, []string{"a", "b"}, out.ids)
	require.NoError(t, appendEvents(d, "c"))
	assert.Equal(t, []string{"a", "b", "c"}, out.ids, "each once, in commit order")
}

func TestAFailedCommitNotStoredIsDropped(t *testing.T) {
	sql, out := newScripted(), &emitted{}
	d := guestdb.New(sql, out.emit)
	sql.commit = commitLost
	require.Error(t, appendEvents(d, "a"))

	// The rerun stores them itself and emits them after its own commit.
	require.NoError(t, appendEvents(d, "a"))
	assert.Equal(t, []string{"a"}, out.ids)
}

func TestAFailedSettlingReadKeepsTheEventsUncertain(t *testing.T) {
	sql, out := newScripted(), &emitted{}
	d := guestdb.New(sql, out.emit)
	sql.commit = commitLate
	require.Error(t, appendEvents(d, "a"))

	sql.readErr = true
	err := appendEvents(d, "b")
	require.Error(t, err)
	assert.True(t, storage.IsTransient(err), "the read's failure is a storage failure: %v", err)
	assert.Empty(t, out.ids)

	require.NoError(t, appendEvents(d, "b"))
	assert.Equal(t, []string{"a", "b"}, out.ids)
}

func TestSelectOnesRefusesWhileATransactionIsOpen(t *testing.T) {
	d := guestdb.New(newScripted(), nil)
	err := d.Tx(context.Background(), func(storage.Tx) error {
		return d.SelectOnes(1)
	})
	require.ErrorIs(t, err, guestdb.ErrTxOpen)
}
