package faultvfs

import (
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// Code is the SQLite result code an injected failure returns: a primary
// code (Full) or an extended one (IOErrWrite, …).
type Code = sqlite3.ExtendedErrorCode

// Codes a test usually injects.
const (
	// Full is SQLITE_FULL: the disk (or the host's quota) is full.
	Full = Code(sqlite3.FULL)
	// Busy is SQLITE_BUSY: another connection holds the lock.
	Busy = Code(sqlite3.BUSY)
	// IOErrWrite is SQLITE_IOERR_WRITE: the device failed a write.
	IOErrWrite = sqlite3.IOERR_WRITE
	// IOErrFsync is SQLITE_IOERR_FSYNC: the device failed a flush.
	IOErrFsync = sqlite3.IOERR_FSYNC
)

// Fault decides which writes of the files opened through its VFS fail. The
// zero value is not usable; New makes one. All methods are safe for
// concurrent use: the test changes the fault while connections write.
type Fault struct {
	now func() int64 // ms; judges windows

	mu       sync.Mutex
	next     int // the next `next` writes fail with nextCode
	nextCode Code
	windows  []window
	late     int // the next `late` commits that wrote report lateCode
	lateCode Code
	lates    []window // commits that wrote inside one report its code
	dirty    bool     // a write succeeded since the last commit finished
	failed   int
	lateDone int
}

type window struct {
	from, until int64
	code        Code
}

// New returns a Fault that fails nothing yet. now reads the clock that
// windows are judged by (the fake clock's Now in tests).
func New(now func() int64) *Fault { return &Fault{now: now} }

// FailNext makes the next n writes fail with code.
func (f *Fault) FailNext(n int, code Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next, f.nextCode = n, code
}

// FailBetween makes every write fail with code while from <= now < until
// (ms on the Fault's clock). Windows add up; Heal clears them.
func (f *Fault) FailBetween(from, until int64, code Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.windows = append(f.windows, window{from, until, code})
}

// FailFor makes every write fail with code from now for d.
func (f *Fault) FailFor(d time.Duration, code Code) {
	now := f.now()
	f.FailBetween(now, now+d.Milliseconds(), code)
}

// FailLateCommits makes the next n commits that wrote something durable
// and visible, and then report code: SQLite's commit has finished when the
// VFS fails its last step (SQLITE_FCNTL_COMMIT_PHASETWO), so the caller
// sees an error for a transaction that is stored.
func (f *Fault) FailLateCommits(n int, code Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.late, f.lateCode = n, code
}

// FailLateBetween makes every commit that wrote something while from <= now
// < until (ms on the Fault's clock) durable and visible, and then report
// code, as FailLateCommits does for a count: a device that acknowledges
// writes it then fails to flush. Windows add up; Heal clears them.
func (f *Fault) FailLateBetween(from, until int64, code Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lates = append(f.lates, window{from, until, code})
}

// Heal clears every pending fault.
func (f *Fault) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next, f.windows, f.late, f.lates = 0, nil, 0, nil
}

// Failed is how many writes failed so far.
func (f *Fault) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// LateCommits is how many commits were reported failed after they were
// durable.
func (f *Fault) LateCommits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lateDone
}

// Failing reports whether a write made now would fail.
func (f *Fault) Failing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, fail := f.peekLocked()
	return fail
}

func (f *Fault) peekLocked() (Code, bool) {
	if f.next > 0 {
		return f.nextCode, true
	}
	return f.within(f.windows)
}

// within finds the window of ws that holds now, if any.
func (f *Fault) within(ws []window) (Code, bool) {
	if len(ws) == 0 {
		return 0, false
	}
	now := f.now()
	for _, w := range ws {
		if w.from <= now && now < w.until {
			return w.code, true
		}
	}
	return 0, false
}

// write decides one write: the error to return, or nil to let it through.
func (f *Fault) write() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	code, fail := f.peekLocked()
	if !fail {
		f.dirty = true
		return nil
	}
	if f.next > 0 {
		f.next--
	}
	f.failed++
	return code
}

// commitDone decides the end of a commit: an error makes a durable commit
// look failed.
func (f *Fault) commitDone() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	dirty := f.dirty
	f.dirty = false
	if !dirty {
		return nil
	}
	if f.late > 0 {
		f.late--
		f.lateDone++
		return f.lateCode
	}
	if code, late := f.within(f.lates); late {
		f.lateDone++
		return code
	}
	return nil
}

// Register makes the VFS name open files through the OS VFS with f's
// faults. Register it before opening a database with it, and Unregister it
// only after every connection using it is closed.
func Register(name string, f *Fault) { vfs.Register(name, &faultVFS{VFS: vfs.Find(""), f: f}) }

// Unregister forgets the VFS name.
func Unregister(name string) { vfs.Unregister(name) }

type faultVFS struct {
	vfs.VFS
	f *Fault
}

func (v *faultVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	file, flags, err := vfsutil.WrapOpen(v.VFS, name, flags)
	if err != nil {
		return file, flags, err
	}
	return &faultFile{File: file, f: v.f}, flags, nil
}

func (v *faultVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	file, flags, err := vfsutil.WrapOpenFilename(v.VFS, name, flags)
	if err != nil {
		return file, flags, err
	}
	return &faultFile{File: file, f: v.f}, flags, nil
}

// faultFile fails writes as its Fault says and forwards everything else,
// the optional interfaces included.
type faultFile struct {
	vfs.File
	f *Fault
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.f.write(); err != nil {
		return 0, err
	}
	return ff.File.WriteAt(p, off)
}

func (ff *faultFile) CommitPhaseTwo() error {
	if err := vfsutil.WrapCommitPhaseTwo(ff.File); err != nil && err != sqlite3.NOTFOUND {
		return err
	}
	if err := ff.f.commitDone(); err != nil {
		return err
	}
	return sqlite3.NOTFOUND // nothing else to do: as if not implemented
}

func (ff *faultFile) Unwrap() vfs.File               { return ff.File }
func (ff *faultFile) SharedMemory() vfs.SharedMemory { return vfsutil.WrapSharedMemory(ff.File) }
func (ff *faultFile) MemoryMapper() vfs.MemoryMapper { return vfsutil.WrapMemoryMapper(ff.File) }
func (ff *faultFile) LockState() vfs.LockLevel       { return vfsutil.WrapLockState(ff.File) }
func (ff *faultFile) PersistWAL() bool               { return vfsutil.WrapPersistWAL(ff.File) }
func (ff *faultFile) SetPersistWAL(keep bool)        { vfsutil.WrapSetPersistWAL(ff.File, keep) }
func (ff *faultFile) PowersafeOverwrite() bool       { return vfsutil.WrapPowersafeOverwrite(ff.File) }
func (ff *faultFile) SetPowersafeOverwrite(psow bool) {
	vfsutil.WrapSetPowersafeOverwrite(ff.File, psow)
}
func (ff *faultFile) ChunkSize(size int)           { vfsutil.WrapChunkSize(ff.File, size) }
func (ff *faultFile) SizeHint(size int64) error    { return vfsutil.WrapSizeHint(ff.File, size) }
func (ff *faultFile) HasMoved() (bool, error)      { return vfsutil.WrapHasMoved(ff.File) }
func (ff *faultFile) Overwrite() error             { return vfsutil.WrapOverwrite(ff.File) }
func (ff *faultFile) SyncSuper(super string) error { return vfsutil.WrapSyncSuper(ff.File, super) }
func (ff *faultFile) BeginAtomicWrite() error      { return vfsutil.WrapBeginAtomicWrite(ff.File) }
func (ff *faultFile) CommitAtomicWrite() error     { return vfsutil.WrapCommitAtomicWrite(ff.File) }
func (ff *faultFile) RollbackAtomicWrite() error   { return vfsutil.WrapRollbackAtomicWrite(ff.File) }
func (ff *faultFile) CheckpointStart()             { vfsutil.WrapCheckpointStart(ff.File) }
func (ff *faultFile) CheckpointDone()              { vfsutil.WrapCheckpointDone(ff.File) }
func (ff *faultFile) Pragma(name, value string) (string, error) {
	return vfsutil.WrapPragma(ff.File, name, value)
}
func (ff *faultFile) BusyHandler(handler func() bool) { vfsutil.WrapBusyHandler(ff.File, handler) }
