//go:build !linux

package runtime

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// reservedMemory is memory_linux.go's; elsewhere guests get wazero's
// default memory.
type reservedMemory struct{}

func newMemoryAllocator(*atomic.Int64) (experimental.MemoryAllocator, *reservedMemory) {
	return nil, nil
}

func (*reservedMemory) release() {}
