//go:build unix

package sqlitedb_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/sqlitedb"
)

// A database's files that exist keep their modes when it is opened again:
// an operator's chmod (here 0640, for a backup group) stands, and only the
// files SQLite creates are made 0600 (private.go).
func TestReopenKeepsAnOperatorsModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	path := filepath.Join(t.TempDir(), "tree.db")
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	exec(t, db, "CREATE TABLE t (x)")
	require.NoError(t, db.Close())
	require.NoError(t, os.Chmod(path, 0o640))

	db = openAt(t, path, sqlitedb.Options{})
	exec(t, db, "INSERT INTO t VALUES (1)")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the operator's mode of the database")
	for _, suffix := range []string{"-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a file the open created: %s", suffix)
	}
}
