//go:build !linux

package runtime

import "github.com/tetratelabs/wazero/experimental"

// reservedMemory is memory_linux.go's; elsewhere guests get wazero's
// default memory.
type reservedMemory struct{}

func newMemoryAllocator() (experimental.MemoryAllocator, *reservedMemory) { return nil, nil }

func (*reservedMemory) release() {}
