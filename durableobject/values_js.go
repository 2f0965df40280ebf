//go:build js && wasm

package durableobject

import (
	"fmt"
	"syscall/js"

	"github.com/revenantrt/revenant/core/storage"
)

// maxSafeInt is the largest integer a JS number holds exactly (2^53-1).
// Ids, sequence numbers and millisecond timestamps stay far below it.
const maxSafeInt = 1<<53 - 1

var jsUint8Array = js.Global().Get("Uint8Array")

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
		if !storage.FitsJSNumber(x) {
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
