//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/logs"
)

// A turn waits for storage.sync() before it runs; a sync that fails is
// warned about and the turn goes on (the claim and wake-up it needs are
// committed already). A sync that throws, as a broken object's storage
// call can instead of rejecting, is such a failure too: as a panic it
// would fail the turn as the driver's ("driver panicked") for a storage
// hiccup the turn itself never met.
func TestTurnGoesOnWhenStorageSyncFails(t *testing.T) {
	for name, sync := range map[string]string{
		"rejects": `() => Promise.reject(new Error("storage sync failed"))`,
		"throws":  `() => { throw new Error("storage sync threw") }`,
	} {
		t.Run(name, func(t *testing.T) {
			storage := js.Global().Get("Object").New()
			storage.Set("sync", js.Global().Call("eval", "("+sync+")"))
			bridge := js.Global().Get("Object").New()
			bridge.Set("storage", storage)
			o := &Object{bridge: bridge, log: logs.New(logs.NewTextHandler(io.Discard, nil))}
			ran := false
			d := o.afterAnswer(core.DriverFunc(func(context.Context, *core.Execution) core.Outcome {
				ran = true
				return core.Outcome{Kind: core.Succeeded}
			}))
			out := d.Run(context.Background(), nil)
			assert.True(t, ran, "the turn ran")
			assert.Equal(t, core.Succeeded, out.Kind)
		})
	}
}

// A turn waits for storage.sync() to settle before it runs (the writes
// that admitted it durable, the 202 let go first), not only for a timer
// tick.
func TestTurnWaitsForStorageSync(t *testing.T) {
	storage := js.Global().Get("Object").New()
	resolve := js.Global().Get("Object").New()
	storage.Set("sync", js.Global().Call("eval", `(r) => () => new Promise((ok) => { r.ok = ok; })`).Invoke(resolve))
	bridge := js.Global().Get("Object").New()
	bridge.Set("storage", storage)
	o := &Object{bridge: bridge, log: logs.New(logs.NewTextHandler(io.Discard, nil))}
	ran := make(chan struct{})
	d := o.afterAnswer(core.DriverFunc(func(context.Context, *core.Execution) core.Outcome {
		close(ran)
		return core.Outcome{Kind: core.Succeeded}
	}))
	go d.Run(context.Background(), nil)
	for range 3 { // every goroutine and timer that could run has run
		nextTask()
	}
	select {
	case <-ran:
		t.Fatal("the turn ran before storage.sync() settled")
	default:
	}
	require.Equal(t, js.TypeFunction, resolve.Get("ok").Type(), "sync was called")
	resolve.Call("ok")
	<-ran
}
