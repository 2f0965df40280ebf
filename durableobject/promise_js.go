//go:build js && wasm

package durableobject

import (
	"errors"
	"fmt"
	"runtime/debug"
	"syscall/js"
)

var (
	jsPromise = js.Global().Get("Promise")
	jsError   = js.Global().Get("Error")
)

// entry makes an entry point the shim calls: it returns a Promise at once
// and does the work in a goroutine, so no synchronous JS callback ever
// blocks. A panic anywhere in it rejects the Promise instead of ending the
// Go program (a panic escaping a js.FuncOf would end it for every later
// event of the object).
func entry(name string, work func(args []js.Value) (any, error)) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) any {
		args = append([]js.Value(nil), args...) // the slice is reused after return
		return newPromise(func() (any, error) {
			v, err := work(args)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return v, nil
		})
	})
}

// newPromise runs work in a goroutine and settles a JS Promise with its
// result: resolved with the value, rejected with an Error on an error or
// a panic.
func newPromise(work func() (any, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			v, err := catch(work)
			if err != nil {
				e := jsError.New(err.Error())
				if errors.As(err, new(setupError)) {
					e.Set("revenantSetup", true) // durableobject/shim.js: not worth a retry
				}
				reject.Invoke(e)
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return jsPromise.New(executor)
}

// errPanic marks an error recovered from a panic.
var errPanic = errors.New("panic")

// catch runs work, turning a panic into an error wrapping errPanic.
func catch(work func() (any, error)) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", errPanic, p, debug.Stack())
		}
	}()
	return work()
}

// callJS makes the JS call f and returns what it returns, or, when it
// throws, the exception's message as an error (recoverJS).
func callJS(f func() js.Value) (v js.Value, err error) {
	defer recoverJS(&err)
	return f(), nil
}

// recoverJS, deferred, turns a JS exception thrown into Go (a panic of a
// js.Error) into an error carrying its message; any other panic goes on.
func recoverJS(err *error) {
	if p := recover(); p != nil {
		je, ok := p.(js.Error)
		if !ok {
			panic(p)
		}
		*err = errors.New(jsText(je.Value))
	}
}

// await waits for a JS Promise from a goroutine (never from a synchronous
// callback: the Promise settles only when Go yields to the event loop).
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	onOK := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: arg0(args)}
		return nil
	})
	onErr := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{err: errors.New(jsText(arg0(args)))}
		return nil
	})
	defer onOK.Release()
	defer onErr.Release()
	p.Call("then", onOK, onErr)
	r := <-ch
	return r.v, r.err
}

func arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// nextTask waits, from a goroutine, until the event loop has run a timer
// of zero delay: every microtask queued before it (an answer's promise
// chain) and every goroutine that could run have run by then.
func nextTask() {
	done := make(chan struct{})
	f := js.FuncOf(func(js.Value, []js.Value) any { close(done); return nil })
	defer f.Release()
	js.Global().Get("setTimeout").Invoke(f, 0) // this = undefined: workerd refuses globalThis
	<-done
}
