//go:build unix

package host_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fresh start creates the index and a tree's database, and their WAL
// and shared-memory files, for their owner only: they hold principals'
// data (which trees a principal has, their conversations), and the
// umask most systems run with (022) would leave them readable by every
// local user whenever the data directory is.
func TestAFreshStartsDatabasesAreTheOwnersOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "a")

	for _, name := range []string{"index.db", "trees/a.db"} {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			path := filepath.Join(e.dir, name+suffix)
			fi, err := os.Stat(path)
			require.NoError(t, err, "the open database has its %s", name+suffix)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s", name+suffix)
		}
	}
}
