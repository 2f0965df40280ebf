package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is wrapped by every decoding failure: a truncated buffer, a
// length past the end, an unknown tag, trailing bytes.
var ErrMalformed = errors.New("abi: malformed message")

// maxCount bounds any decoded element count, so a hostile length cannot make
// a decoder allocate without bound before it notices the buffer is short.
const maxCount = 1 << 24

// Encoder appends fields to a buffer. The zero value is ready to use.
type Encoder struct {
	b []byte
}

// Bytes returns the encoded message.
func (e *Encoder) Bytes() []byte { return e.b }

// Uvarint appends an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

// Varint appends a zig-zag signed varint.
func (e *Encoder) Varint(v int64) { e.b = binary.AppendVarint(e.b, v) }

// Byte appends one byte.
func (e *Encoder) Byte(v byte) { e.b = append(e.b, v) }

// Bool appends a byte 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// Blob appends a length-prefixed byte string.
func (e *Encoder) Blob(v []byte) {
	e.Uvarint(uint64(len(v)))
	e.b = append(e.b, v...)
}

// String appends a length-prefixed string.
func (e *Encoder) String(v string) {
	e.Uvarint(uint64(len(v)))
	e.b = append(e.b, v...)
}

// Float appends a float64 as 8 little-endian bytes.
func (e *Encoder) Float(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }

// Decoder reads fields from a buffer. The first failure sticks: later reads
// return zero values and Err reports it, so a decode function can read every
// field and check once.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder reads b. It does not copy b: decoded strings are copies, blobs
// are copies too, so b may be reused afterwards.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err is the first failure, wrapping ErrMalformed.
func (d *Decoder) Err() error { return d.err }

// Finish reports the first failure, or trailing bytes as one.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func (d *Decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		// Overlong forms are refused: each value has one encoding.
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a zig-zag signed varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("short buffer")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	switch v := d.Byte(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bad bool %d", v)
		return false
	}
}

// Count reads an element count, bounded so a decoder never preallocates
// past what the buffer could hold.
func (d *Decoder) Count() int {
	n := d.Uvarint()
	if n > maxCount || n > uint64(len(d.b)) {
		d.fail("count %d past the buffer", n)
		return 0
	}
	return int(n)
}

func (d *Decoder) raw() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d past the buffer (%d left)", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Blob reads a length-prefixed byte string (a copy; nil when empty).
func (d *Decoder) Blob() []byte {
	v := d.raw()
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

// String reads a length-prefixed string.
func (d *Decoder) String() string { return string(d.raw()) }

// Float reads a float64.
func (d *Decoder) Float() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("short float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
