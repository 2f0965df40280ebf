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
	umask022(t)
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

// The directory of the trees' databases that the host creates is its
// owner's only (0700, host/doc.go), whatever the umask: its listing names
// every tree.
func TestTheTreesDirectoryIsTheOwnersOnly(t *testing.T) {
	umask022(t)
	e := newEnv(t)
	e.open(e.config())

	fi, err := os.Stat(filepath.Join(e.dir, "trees"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// umask022 runs the rest of the test under the umask most systems run
// with, which leaves what is not made private readable by everyone.
func umask022(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}
