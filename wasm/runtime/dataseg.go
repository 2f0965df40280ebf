package runtime

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
)

// Go's wasm linker splits the guest's data into up to 100,000 active
// segments (it cuts at runs of zeros to keep the file small), and wazero
// evaluates each segment's offset expression and copies it apart at every
// instantiation: with the guest's ~80,000 segments that was more than half
// of instantiating it (docs/RATIONALE.md, "A lean guest"). Linear memory
// starts zeroed, so one segment spanning them all, gaps as zeros, fills
// memory with exactly the same bytes; coalesceData rewrites the module so.

// maxCoalescedSpan bounds the single segment coalescing makes: past it the
// zeros it would add cost more than the segments it saves, and the module
// is left as it is.
const maxCoalescedSpan = 64 << 20

// Wasm binary encoding (WebAssembly core spec, 5.5).
const (
	sectionData      = 11
	sectionDataCount = 12
	opI32Const       = 0x41
	opEnd            = 0x0b
)

var errNotCoalescible = errors.New("data section not coalescible")

// coalesceData returns wasm with its data section rewritten as one active
// segment, or wasm itself when there is nothing to gain or the section is
// not the simple kind (every segment active in memory 0 at an i32.const
// offset, none overlapping, no data count section).
// A malformed module is returned as it is, for CompileModule to refuse.
func coalesceData(wasm []byte) []byte {
	if len(wasm) < 8 {
		return wasm
	}
	var head, start, end int // the data section's id byte, its contents
	for off := 8; off < len(wasm); {
		id := wasm[off]
		n, k := binary.Uvarint(wasm[off+1:])
		if k <= 0 || n > uint64(len(wasm)-off-1-k) {
			return wasm
		}
		body := off + 1 + k
		switch id {
		case sectionDataCount:
			return wasm // its count would need rewriting too; Go emits none
		case sectionData:
			head, start, end = off, body, body+int(n)
		}
		off = body + int(n)
	}
	if end == 0 {
		return wasm
	}
	seg, err := coalesceSegments(wasm[start:end])
	if err != nil {
		return wasm
	}
	out := make([]byte, 0, len(wasm)-(end-start)+len(seg)+binary.MaxVarintLen32)
	out = append(out, wasm[:head+1]...)
	out = binary.AppendUvarint(out, uint64(len(seg)))
	out = append(out, seg...)
	return append(out, wasm[end:]...)
}

// coalesceSegments reads a data section's contents and returns the
// contents of the equivalent one-segment section.
func coalesceSegments(sec []byte) ([]byte, error) {
	count, k := binary.Uvarint(sec)
	if k <= 0 || count < 2 {
		return nil, errNotCoalescible
	}
	sec = sec[k:]
	type segment struct {
		at   uint64
		data []byte
	}
	segs := make([]segment, 0, min(count, uint64(len(sec))))
	for range count {
		if len(sec) < 1 || sec[0] != 0 { // flags 0: active, memory 0
			return nil, errNotCoalescible
		}
		at, rest, err := constOffset(sec[1:])
		if err != nil {
			return nil, errNotCoalescible
		}
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, errNotCoalescible
		}
		data := rest[k : k+int(n)]
		segs = append(segs, segment{at: at, data: data})
		sec = rest[k+int(n):]
	}
	if len(sec) != 0 {
		return nil, errNotCoalescible
	}
	// Segments that do not overlap write the same bytes in any order (Go's
	// linker emits its data sections' runs out of address order).
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(a.at, b.at) })
	var next uint64 // the end of the previous segment
	for _, s := range segs {
		if s.at < next {
			return nil, errNotCoalescible
		}
		next = s.at + uint64(len(s.data))
	}
	first := segs[0].at
	span := next - first
	if span > maxCoalescedSpan {
		return nil, errNotCoalescible
	}
	image := make([]byte, span)
	for _, s := range segs {
		copy(image[s.at-first:], s.data)
	}
	out := []byte{1, 0, opI32Const}
	out = appendSleb32(out, int32(uint32(first)))
	out = append(out, opEnd)
	out = binary.AppendUvarint(out, span)
	return append(out, image...), nil
}

// constOffset reads an offset expression "i32.const v; end" and returns v
// as the unsigned address it is, and the bytes after it.
func constOffset(b []byte) (uint64, []byte, error) {
	if len(b) < 1 || b[0] != opI32Const {
		return 0, nil, errNotCoalescible
	}
	v, k := sleb(b[1:])
	if k <= 0 || len(b) < 1+k+1 || b[1+k] != opEnd || v < -1<<31 || v >= 1<<31 {
		return 0, nil, errNotCoalescible
	}
	return uint64(uint32(int32(v))), b[1+k+1:], nil
}

// sleb reads a signed LEB128 of at most 5 bytes (an i32).
func sleb(b []byte) (int64, int) {
	var v int64
	var shift uint
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// appendSleb32 appends v as a signed LEB128.
func appendSleb32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if x == 0 && c&0x40 == 0 || x == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
