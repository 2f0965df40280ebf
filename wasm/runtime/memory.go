package runtime

// sliceMemory is wazero's default linear memory, a Go slice grown by
// copying: what a guest gets where a reservedMemory cannot be mapped.
type sliceMemory struct{ buf []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		buf := make([]byte, size, size+size/4)
		copy(buf, m.buf)
		m.buf = buf
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *sliceMemory) Free() {}
