//go:build linux

package runtime

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// reservedMemory is a guest's linear memory in one anonymous mapping of its
// maximum size, reserved but not committed (MAP_NORESERVE): growing it
// only lengthens the slice, where wazero's default reallocates and copies
// the whole memory at every memory.grow (the Go runtime grows it several
// times while it starts: more than a millisecond of each instantiation),
// and untouched pages cost nothing.
//
// Free (the module closed) does nothing: a guest closed from another
// goroutine may still be running, and it must keep its memory until it
// reaches an import and stops, not fault the process. The Guest unmaps
// the memory once no call can run (release).
type reservedMemory struct {
	buf []byte // the whole mapping
}

// newMemoryAllocator returns the allocator of one guest instance and the
// release of what it allocated, or nils where the mapping is refused
// (strict overcommit): wazero's default then.
func newMemoryAllocator() (experimental.MemoryAllocator, *reservedMemory) {
	mem := &reservedMemory{}
	alloc := experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
		buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err != nil {
			return &sliceMemory{}
		}
		// Huge pages where the system allows them on request (transparent
		// huge pages in "madvise" mode): the data the instantiation copies
		// and the heap the Go runtime sets up fault in 2 MiB at a time, not
		// 4 KiB. Halves an instantiation's CPU time here. Failure is fine.
		_ = syscall.Madvise(buf, syscall.MADV_HUGEPAGE)
		mem.buf = buf
		return mem
	})
	return alloc, mem
}

func (m *reservedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil // past the module's maximum: memory.grow fails
	}
	return m.buf[:size]
}

func (m *reservedMemory) Free() {}

// release unmaps the memory; nothing may use it any more.
func (m *reservedMemory) release() {
	if m != nil && m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
