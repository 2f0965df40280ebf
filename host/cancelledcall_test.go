package host_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
)

// stopAtAuthorize is a non-idempotent tool that stops its instance while
// its call is being authorized (Resources runs then, before any side
// effect): the instance's Close cancels the running execution, and the
// context given to Close has already ended, so Close returns at once
// instead of waiting for the execution this call runs in.
type stopAtAuthorize struct {
	mu     sync.Mutex
	inst   *core.Instance // the instance to stop; nil once stopped
	bodies atomic.Int32   // Execute calls
}

func (s *stopAtAuthorize) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "pay", Description: "pays", Schema: json.RawMessage(`{"type":"object"}`)}
}
func (s *stopAtAuthorize) Idempotent() bool    { return false }
func (s *stopAtAuthorize) Permission() string  { return "allow" }
func (s *stopAtAuthorize) Limits() tool.Limits { return tool.Limits{} }

func (s *stopAtAuthorize) Resources(json.RawMessage) ([]string, error) {
	s.mu.Lock()
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst != nil {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		_ = inst.Close(ended) // cancels the executions; returns without waiting
	}
	return nil, nil
}

func (s *stopAtAuthorize) Execute(context.Context, tool.Call) (string, error) {
	s.bodies.Add(1)
	return "paid", nil
}

// A call whose execution is stopped before its body starts (a graceful
// shutdown that lands while the call is authorized) is not written
// `executing`: its body never ran, so after the restart it is authorized
// and run, once. Written executing, a non-idempotent call would be
// settled on resume as "outcome unknown, not run again" (UnknownOutcome),
// telling the model a payment may have happened that never did, and the
// call would never run.
func TestACallStoppedBeforeItsBodyRunsAfterTheRestart(t *testing.T) {
	pay := &stopAtAuthorize{}
	cfg, h, inst, id := offlineRunnerHost(t, t.TempDir(), pay)
	pay.mu.Lock()
	pay.inst = inst
	pay.mu.Unlock()
	admit(t, inst, id, "/tool pay {}")
	idle(t, inst)
	require.Zero(t, pay.bodies.Load(), "the body never started in the stopped instance")
	evs, err := inst.Events(ctx, id, 0, 0)
	require.NoError(t, err)
	pay.mu.Lock()
	require.Nil(t, pay.inst, "the call was authorized, and stopped its instance")
	pay.mu.Unlock()
	assert.Empty(t, ofType(evs, event.ToolExecuting), "a call whose body never started was written executing")
	require.NoError(t, h.Close(ctx))

	h2 := openRecovered(t, cfg)
	inst2, _, err := h2.Get(ctx, id)
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, int32(1), pay.bodies.Load(), "the call runs once after the restart")
	evs, err = inst2.Events(ctx, id, 0, 0)
	require.NoError(t, err)
	for _, ev := range ofType(evs, event.ToolSettled) {
		assert.NotContains(t, string(ev.Data), runner.UnknownOutcome, "the call was settled as of unknown outcome")
	}
	assert.Equal(t, []event.Type{event.ExecutionSucceeded}, terminalTypes(t, inst2, id))
}

func ofType(evs []event.Event, typ event.Type) []event.Event {
	var out []event.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}
