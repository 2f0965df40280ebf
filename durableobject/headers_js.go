//go:build js && wasm

package durableobject

import (
	"encoding/json"
	"fmt"
	"syscall/js"

	"github.com/revenantrt/revenant/core/httpmsg"
)

var jsJSON = js.Global().Get("JSON")

// Headers cross between Go and JS as one JSON string of [name, value]
// pairs: read pair by pair, every pair and every name and value is a JS
// value Go holds, each with a finalizer, and a warm turn's profile showed
// the finalizers (runtime.SetFinalizer, whose cost grows with the values
// waiting for the next GC) as a larger cost than the JSON.

// headersFromJS adds the pairs of v, a JS array of [name, value] string
// pairs (the shim's request headers, Array.from(headers.entries())), to h.
func headersFromJS(h httpmsg.Header, v js.Value) error {
	var pairs [][2]string
	if err := json.Unmarshal([]byte(jsJSON.Call("stringify", v).String()), &pairs); err != nil {
		return fmt.Errorf("read headers: %w", err)
	}
	for _, kv := range pairs {
		h.AddReceived(kv[0], kv[1])
	}
	return nil
}

// headersToJS is h as a JS array of [name, value] pairs, what Headers and
// Response take.
func headersToJS(h httpmsg.Header) js.Value {
	pairs := make([][2]string, 0, len(h))
	for k, vs := range h {
		for _, v := range vs {
			pairs = append(pairs, [2]string{k, v})
		}
	}
	b, err := json.Marshal(pairs)
	if err != nil { // strings always marshal
		panic(fmt.Sprintf("durableobject: marshal headers: %v", err))
	}
	return jsJSON.Call("parse", string(b))
}
