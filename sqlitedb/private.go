package sqlitedb

import (
	"os"
	"sync"

	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// privateName is the VFS Open uses when Options.VFS is empty: the OS VFS,
// creating files for their owner only (privateVFS).
const privateName = "revenant-private"

var registerPrivate = sync.OnceFunc(func() { vfs.Register(privateName, privateVFS{vfs.Find("")}) })

// privateVFS is the OS VFS, except that a file it creates for a database
// (the database, its rollback journal, its WAL) and the WAL's
// shared-memory file are created readable and writable by their owner
// only (0600): a tree and the host's index hold principals' data, and the
// OS VFS creates files 0666 less the umask, most often 0644. Each is
// created so before the OS VFS opens it, so none is ever open to others
// for a moment, and the WAL's is created as its WAL is, before SQLite
// maps it. A file that exists keeps its mode: an operator's chmod stands.
type privateVFS struct{ vfs.VFS }

func (v privateVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	if name != "" && flags&vfs.OPEN_CREATE != 0 {
		createPrivate(name)
	}
	return vfsutil.WrapOpen(v.VFS, name, flags)
}

func (v privateVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	if name != nil && flags&vfs.OPEN_CREATE != 0 {
		createPrivate(name.String())
		if flags&vfs.OPEN_WAL != 0 {
			createPrivate(name.Database() + "-shm")
		}
	}
	return vfsutil.WrapOpenFilename(v.VFS, name, flags)
}

// createPrivate creates the file at path, empty and 0600, unless it
// exists. A failure is left to the OS VFS's own open, which reports it
// with the code SQLite expects.
func createPrivate(path string) {
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_ = f.Close()
	}
}
