//go:build js && wasm

package durableobject

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/revenantrt/revenant/core/storage"
)

// Value tags of sqlQuery's answer (sql.mjs).
const (
	tagNull   = 0
	tagNumber = 1
	tagString = 2
	tagBlob   = 3
)

var errShortRows = errors.New("durableobject: sqlQuery's answer ends early")

// decodeRows reads sqlQuery's answer (sql.mjs has the layout) into core's
// value types: nil, int64, float64, string or []byte. DO SQL returns every
// number as a JS number: an integral one within 2^53 is read as int64 (so
// a REAL column holding 2.0 reads as int64 2, which storage.Rows scans
// the same way), anything else as float64.
func decodeRows(b []byte) (*storage.Rows, error) {
	r := rowReader{b: b}
	cols := make([]string, r.u32())
	for i := range cols {
		cols[i] = string(r.bytes())
	}
	n := r.u32()
	if r.err != nil || n > len(r.b) { // every value takes a byte at least
		return nil, errShortRows
	}
	rows := &storage.Rows{Columns: cols, Values: make([][]any, n)}
	for i := range rows.Values {
		row := make([]any, len(cols))
		for j := range row {
			row[j] = r.value()
		}
		rows.Values[i] = row
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		// sqlQuery answers its exact length: bytes past the last row mean
		// Go read the answer's length or buffer wrong.
		return nil, fmt.Errorf("durableobject: sqlQuery's answer has %d bytes past its last row", len(r.b))
	}
	return rows, nil
}

// rowReader reads sqlQuery's answer; the first error sticks.
type rowReader struct {
	b   []byte
	err error
}

func (r *rowReader) take(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.err = errShortRows
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *rowReader) u32() int {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b))
}

func (r *rowReader) bytes() []byte { return r.take(r.u32()) }

func (r *rowReader) value() any {
	tag := r.take(1)
	if tag == nil {
		return nil
	}
	switch tag[0] {
	case tagNull:
		return nil
	case tagNumber:
		b := r.take(8)
		if b == nil {
			return nil
		}
		return number(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case tagString:
		return string(r.bytes())
	case tagBlob:
		return append([]byte{}, r.bytes()...)
	}
	r.err = fmt.Errorf("durableobject: sqlQuery's answer has value tag %d", tag[0])
	return nil
}

// number is a JS number as core's value: int64 when integral and exact.
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) <= maxSafeInt {
		return int64(f)
	}
	return f
}
