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

// The directory of the trees' databases that the host creates is its
// owner's only (0700, host/doc.go), whatever the umask: its listing names
// every tree.
func TestTheTreesDirectoryIsTheOwnersOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	e := newEnv(t)
	e.open(e.config())

	fi, err := os.Stat(filepath.Join(e.dir, "trees"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}
