package runtime

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/guestdb"
)

// hostSQL is guestdb.SQL natively: each call is the runtime's own import
// body (sql.go) on the host-owned Conn, the statement decoded from its wire
// form as the import decodes it. So the storage suite drives the guest's
// real DB code (wasm/guestdb: transaction shape, encoding and decoding of
// statements, rows and errors) over the runtime's real SQL imports; what
// it leaves out is wasm memory.
type hostSQL struct{ conn Conn }

func (s hostSQL) Begin() []byte         { return sqlBegin(s.conn) }
func (s hostSQL) Exec(b []byte) []byte  { return sqlExec(s.conn, decodeStatement(b)) }
func (s hostSQL) Query(b []byte) []byte { return sqlQuery(s.conn, decodeStatement(b)) }
func (s hostSQL) Commit() []byte        { return sqlCommit(s.conn) }
func (s hostSQL) Rollback() []byte      { return sqlRollback(s.conn) }

// keptCommitSQL breaks the guest on purpose: the rollback the guest sends
// after a failed COMMIT never reaches the Conn, as if the guest kept the
// failed commit's transaction open.
type keptCommitSQL struct {
	hostSQL
	commitFailed bool
}

func (s *keptCommitSQL) Commit() []byte {
	res := s.hostSQL.Commit()
	s.commitFailed = len(res) > 0 && res[0] == abi.ResultError
	return res
}

func (s *keptCommitSQL) Rollback() []byte {
	if s.commitFailed {
		s.commitFailed = false
		return nil
	}
	return s.hostSQL.Rollback()
}

// guestFile is one database file, its fault VFS, and the guest DBs on it,
// each over its own host connection (a sqlitedb.Conn, as the wazero host
// gives a guest).
type guestFile struct {
	path   string
	vfs    string
	fault  *faultvfs.Fault
	broken bool // every guest DB keeps a failed commit open
}

// suiteGuest is the guest's DB with the suite's capabilities.
type suiteGuest struct {
	*guestdb.DB
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
	var sql guestdb.SQL = hostSQL{conn}
	if f.broken {
		sql = &keptCommitSQL{hostSQL: hostSQL{conn}}
	}
	return &suiteGuest{DB: guestdb.New(sql, nil), file: f, db: db}
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

// TestGuestConnConformance runs the storage suite against the guest's DB
// code (wasm/guestdb) over the runtime's SQL import bodies and the
// host-owned Conn, every value and failure crossing the ABI.
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
