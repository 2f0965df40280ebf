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
// emit bookkeeping and the transaction's shape (a ROLLBACK after every
// failure), which the suite cannot see, against a scripted host.

// scriptedSQL is a host whose events table is a set of ids: a commit
// stores the transaction's events unless told it fails before the disk;
// the next commit may be reported failed all the same (a late IOERR).
type scriptedSQL struct {
	stored  map[string]bool
	staged  []string // ids the open transaction appended
	commit  commitOutcome
	readErr bool // the next query fails with IOERR
	// beginErr, if set, is the host's error for the next BEGIN.
	beginErr *abi.SQLError
	// trailing makes each Exec answer carry a byte past its count.
	trailing bool
	calls    []string // begin, commit and rollback, in order
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

func (s *scriptedSQL) Begin() []byte {
	s.calls = append(s.calls, "begin")
	s.staged = nil
	if e := s.beginErr; e != nil {
		s.beginErr = nil
		return append([]byte{abi.ResultError}, e.Encode()...)
	}
	return nil
}

func (s *scriptedSQL) Exec(stmt []byte) []byte {
	st, err := abi.DecodeStatement(stmt)
	if err != nil {
		panic(err)
	}
	s.staged = append(s.staged, st.Args[0].(string))
	var e abi.Encoder
	e.Byte(abi.ResultOK)
	e.Varint(1)
	if s.trailing {
		e.Byte(0)
	}
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
	s.calls = append(s.calls, "commit")
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

func (s *scriptedSQL) Rollback() []byte {
	s.calls = append(s.calls, "rollback")
	s.staged = nil
	return nil
}

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

// A cancelled context runs nothing: fn does not run and not even BEGIN
// crosses to the host.
func TestACancelledContextRunsNothing(t *testing.T) {
	sql := newScripted()
	d := guestdb.New(sql, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := d.Tx(cancelled, func(storage.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
	assert.Empty(t, sql.calls)
}

// Every failure ends in a ROLLBACK (DESIGN §8: a failed BEGIN or COMMIT may
// leave the host's transaction open); a transaction that commits needs none.
func TestEveryFailedTransactionIsRolledBack(t *testing.T) {
	sql := newScripted()
	d := guestdb.New(sql, nil)
	require.NoError(t, appendEvents(d, "a"))
	assert.Equal(t, []string{"begin", "commit"}, sql.calls)

	for name, fail := range map[string]func(){
		"fn's error":      func() {},
		"a failed BEGIN":  func() { sql.beginErr = &abi.SQLError{Code: int64(storage.CodeBusy), Message: "scripted"} },
		"a failed COMMIT": func() { sql.commit = commitLost },
	} {
		sql.calls = nil
		fail()
		err := d.Tx(context.Background(), func(tx storage.Tx) error {
			if name == "fn's error" {
				return errors.New("fn failed")
			}
			_, err := tx.Exec(`INSERT INTO events (id) VALUES (?)`, "x")
			return err
		})
		require.Error(t, err, name)
		assert.Equal(t, "rollback", sql.calls[len(sql.calls)-1], "%s: %v", name, sql.calls)
	}
}

// The host's "database closed" is storage.ErrClosed on the guest's side
// too, never a storage failure to retry.
func TestAClosedHostDatabaseIsErrClosed(t *testing.T) {
	sql := newScripted()
	d := guestdb.New(sql, nil)
	sql.beginErr = &abi.SQLError{Code: abi.SQLCodeClosed, Message: "instance stopped"}
	err := d.Tx(context.Background(), func(storage.Tx) error { return nil })
	require.ErrorIs(t, err, storage.ErrClosed)
	assert.False(t, storage.IsTransient(err))
}

// An Exec answer with bytes past its count is malformed, not a count.
func TestAnExecAnswerWithTrailingBytesIsMalformed(t *testing.T) {
	sql := newScripted()
	sql.trailing = true
	err := appendEvents(guestdb.New(sql, nil), "a")
	require.ErrorIs(t, err, abi.ErrMalformed)
}

// answerSQL answers every query with one row holding v.
type answerSQL struct {
	*scriptedSQL
	v any
}

func (s answerSQL) Query([]byte) []byte {
	b, err := abi.Rows{Columns: []string{"1"}, Values: [][]any{{s.v}}}.Encode()
	if err != nil {
		panic(err)
	}
	return append([]byte{abi.ResultOK}, b...)
}

// SelectOnes checks each answer's value, not only its shape, and rolls
// back when one is wrong.
func TestSelectOnesRefusesAWrongAnswer(t *testing.T) {
	require.NoError(t, guestdb.New(answerSQL{newScripted(), int64(1)}, nil).SelectOnes(2))

	sql := answerSQL{newScripted(), int64(2)}
	err := guestdb.New(sql, nil).SelectOnes(2)
	require.ErrorContains(t, err, "SELECT 1 answered")
	assert.Equal(t, []string{"begin", "rollback"}, sql.calls)
}
