//go:build js && wasm

package durableobject

import (
	"fmt"
	"math"
	"syscall/js"
)

// maxSafeInt is the largest integer a JS number holds exactly (2^53-1).
// Ids, sequence numbers and millisecond timestamps stay far below it.
const maxSafeInt = 1<<53 - 1

var (
	jsUint8Array  = js.Global().Get("Uint8Array")
	jsArrayBuffer = js.Global().Get("ArrayBuffer")
)

// toJS converts an SQL argument for sql.exec: nil, integers, floats,
// strings and bools as JS primitives, []byte as an ArrayBuffer (the BLOB
// type of Durable Object SQL). An integer a JS number cannot hold exactly
// is refused rather than silently rounded.
func toJS(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		// Beyond 2^53 only integers a float64 holds exactly pass (core's
		// open upper bounds, like 1<<62); SQLite compares them numerically.
		// Any other would be rounded, so it is refused.
		if f := float64(x); (x > maxSafeInt || x < -maxSafeInt) && (f >= 1<<63 || int64(f) != x) {
			return nil, fmt.Errorf("integer %d does not fit a JS number", x)
		}
		return float64(x), nil
	case int:
		return toJS(int64(x))
	case int32:
		return float64(x), nil
	case bool:
		if x {
			return 1.0, nil
		}
		return 0.0, nil
	case float64:
		return x, nil
	case string:
		return x, nil
	case []byte:
		u := jsUint8Array.New(len(x))
		js.CopyBytesToJS(u, x)
		return u.Get("buffer"), nil
	default:
		return nil, fmt.Errorf("unsupported SQL argument %T", v)
	}
}

// fromJS converts one value of a result row to core's value types: nil,
// int64, float64, string or []byte. DO SQL returns every number as a JS
// number: an integral one within 2^53 is read as int64 (so a REAL column
// holding 2.0 reads as int64 2, which storage.Rows scans the same way),
// anything else as float64.
func fromJS(v js.Value) (any, error) {
	switch v.Type() {
	case js.TypeNull, js.TypeUndefined:
		return nil, nil
	case js.TypeNumber:
		f := v.Float()
		if f == math.Trunc(f) && math.Abs(f) <= maxSafeInt {
			return int64(f), nil
		}
		return f, nil
	case js.TypeString:
		return v.String(), nil
	case js.TypeBoolean:
		if v.Bool() {
			return int64(1), nil
		}
		return int64(0), nil
	case js.TypeObject:
		if v.InstanceOf(jsArrayBuffer) {
			v = jsUint8Array.New(v)
		}
		if v.InstanceOf(jsUint8Array) {
			b := make([]byte, v.Get("length").Int())
			js.CopyBytesToGo(b, v)
			return b, nil
		}
	}
	return nil, fmt.Errorf("unsupported SQL value of JS type %s", v.Type())
}
