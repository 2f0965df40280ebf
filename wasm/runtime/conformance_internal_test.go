package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
	"github.com/revenantrt/revenant/host/sqlitedb"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/wasm/abi"
)

// guestDB is storage.DB as the guest builds it over the SQL imports
// (wasm/guest/db.go), run natively so the storage suite can drive it: the
// guest's transaction shape (BEGIN; fn; COMMIT; ROLLBACK after any
// failure), each statement through the ABI's wire form, the host-owned
// Conn, and each result or failure through the runtime's own encoding
// (Guest.setResult) and the guest's decoding. What it leaves out is wasm
// memory and the guest's event bookkeeping.
type guestDB struct {
	conn Conn
	g    Guest // only its pending-result buffer is used

	mu sync.Mutex // one transaction at a time, as in the guest
	// keepFailedCommit breaks the guest on purpose: a COMMIT that failed is
	// not rolled back.
	keepFailedCommit bool
}

func (d *guestDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := d.result(nil, d.conn.Begin()); err != nil {
		d.rollback()
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			d.rollback()
		}
	}()
	if err := fn(guestTx{d}); err != nil {
		return err
	}
	if _, err := d.result(nil, d.conn.Commit()); err != nil {
		done = d.keepFailedCommit
		return fmt.Errorf("commit: %w", err)
	}
	done = true
	return nil
}

func (d *guestDB) rollback() { _, _ = d.result(nil, d.conn.Rollback()) }

// result passes an import's outcome through setResult, as the import does,
// and reads it back as the guest's sqlPayload does.
func (d *guestDB) result(ok []byte, err error) ([]byte, error) {
	n := d.g.setResult(ok, err)
	res := d.g.result[:n]
	d.g.result = nil
	if len(res) == 0 {
		return nil, nil
	}
	switch res[0] {
	case abi.ResultOK:
		return res[1:], nil
	case abi.ResultError:
		se, err := abi.DecodeSQLError(res[1:])
		if err != nil {
			return nil, err
		}
		switch se.Code {
		case codeClosed:
			return nil, fmt.Errorf("%s: %w", se.Message, storage.ErrClosed)
		case 0:
			return nil, errors.New(se.Message)
		}
		return nil, &storage.Error{Code: storage.Code(se.Code), Msg: se.Message}
	}
	return nil, fmt.Errorf("sql result tag %d: %w", res[0], abi.ErrMalformed)
}

type guestTx struct{ d *guestDB }

// statement is what the host decodes of the guest's encoded statement.
func statement(query string, args []any) (abi.Statement, error) {
	b, err := abi.Statement{Query: query, Args: args}.Encode()
	if err != nil {
		return abi.Statement{}, err
	}
	return abi.DecodeStatement(b)
}

func (t guestTx) Exec(query string, args ...any) (int64, error) {
	st, err := statement(query, args)
	if err != nil {
		return 0, err
	}
	n, err := t.d.conn.Exec(st.Query, st.Args)
	var e abi.Encoder
	e.Byte(abi.ResultOK)
	e.Varint(n)
	res, err := t.d.result(e.Bytes(), err)
	if err != nil {
		return 0, err
	}
	dec := abi.NewDecoder(res)
	changed := dec.Varint()
	return changed, dec.Finish()
}

func (t guestTx) Query(query string, args ...any) (*storage.Rows, error) {
	st, err := statement(query, args)
	if err != nil {
		return nil, err
	}
	rows, err := t.d.conn.Query(st.Query, st.Args)
	var ok []byte
	if err == nil {
		var body []byte
		body, err = abi.Rows{Columns: rows.Columns, Values: rows.Values}.Encode()
		ok = append([]byte{abi.ResultOK}, body...)
	}
	res, err := t.d.result(ok, err)
	if err != nil {
		return nil, err
	}
	decoded, err := abi.DecodeRows(res)
	if err != nil {
		return nil, err
	}
	return &storage.Rows{Columns: decoded.Columns, Values: decoded.Values}, nil
}

// guestFile is one database file, its fault VFS, and the guestDBs on it,
// each over its own host connection (a sqlitedb.Conn, as the wazero host
// gives a guest).
type guestFile struct {
	path   string
	vfs    string
	fault  *faultvfs.Fault
	broken bool // every guestDB keeps a failed commit open
}

// suiteGuest is a guestDB with the suite's capabilities.
type suiteGuest struct {
	*guestDB
	file *guestFile
	db   *sqlitedb.DB
}

var guestVFSSeq atomic.Int64

func newGuestFile(t conform.T, dir string, broken bool) *guestFile {
	f := &guestFile{
		path:   filepath.Join(dir, "tree.db"),
		vfs:    fmt.Sprintf("runtime-conformance-%d", guestVFSSeq.Add(1)),
		fault:  faultvfs.New(func() int64 { return 0 }),
		broken: broken,
	}
	faultvfs.Register(f.vfs, f.fault)
	t.Cleanup(func() { faultvfs.Unregister(f.vfs) })
	return f
}

// open is a guest over a new host connection with busy wait wait (zero:
// sqlitedb's default).
func (f *guestFile) open(t conform.T, wait time.Duration) *suiteGuest {
	db, err := sqlitedb.Open(f.path, sqlitedb.Options{VFS: f.vfs, BusyTimeout: wait})
	require.NoError(t, err)
	conn := db.Conn()
	t.Cleanup(func() {
		// A transaction left open (the broken guest) holds the DB's lock,
		// which Close takes.
		_ = conn.Rollback()
		db.Close()
	})
	return &suiteGuest{guestDB: &guestDB{conn: conn, keepFailedCommit: f.broken}, file: f, db: db}
}

func (s *suiteGuest) Rival(t conform.T, wait time.Duration) storage.DB { return s.file.open(t, wait) }

func (s *suiteGuest) FailNextCommit(code storage.Code) { s.file.fault.FailNext(1, faultvfs.Code(code)) }

// Close closes the host's connection under the guest.
func (s *suiteGuest) Close() error { return s.db.Close() }

var (
	_ storagetest.Rivals       = (*suiteGuest)(nil)
	_ storagetest.CommitFaults = (*suiteGuest)(nil)
	_ storagetest.Closer       = (*suiteGuest)(nil)
)

// noContextInImports is the suite's one test a guest cannot pass.
var noContextInImports = storagetest.Skip{
	Test: "busy/the context ends a busy wait",
	Why: "the SQL imports carry no context: a guest's wait for another connection's lock is bounded " +
		"only by the host connection's busy timeout (Conn.Begin takes no context), and nothing in the " +
		"guest runs during an import that could cancel it",
}

// TestGuestConnConformance runs the storage suite against the guest's
// connection: the guest's transaction shape over the host-owned Conn, every
// value and failure crossing the ABI.
func TestGuestConnConformance(t *testing.T) {
	storagetest.Run(t, func(ct conform.T) storage.DB {
		return newGuestFile(ct, t.TempDir(), false).open(ct, 0)
	}, noContextInImports)
}

// TestGuestConnConformanceCatchesKeptCommit runs the suite against a guest
// that does not roll back a failed COMMIT (DESIGN §8: "roll back before
// retrying") and checks that the suite's commit test, and only it, fails.
func TestGuestConnConformanceCatchesKeptCommit(t *testing.T) {
	r := conform.Record("suite", func(ct conform.T) {
		storagetest.RunT(ct, func(ct conform.T) storage.DB {
			return newGuestFile(ct, t.TempDir(), true).open(ct, 0)
		}, noContextInImports)
	})
	assert.Equal(t, []string{"suite/commit/a failed commit left open is rolled back before the next transaction"}, r.Failures())
}
