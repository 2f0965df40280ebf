package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// killingModel streams a text chunk big enough to be checkpointed, then
// kills the instance it runs on, every time it is asked: a crash mid-stream
// on every boot.
type killingModel struct {
	mu      sync.Mutex
	current *treetest.Node
	booted  chan struct{} // closed once current is the node being asked
}

func (m *killingModel) Name() string { return "killing" }

func (m *killingModel) Stream(context.Context, model.Request) (model.Stream, error) {
	return &killingStream{m: m}, nil
}

type killingStream struct {
	m *killingModel
	n int
}

// checkpointed is a chunk the size of the test's checkpoint.
const checkpointed = "some words "

// Recv sends two chunks, then kills. The runner checkpoints the first
// (it fills the checkpoint size) before it takes the second, and the
// receiver asks for the third only after the second was taken: the kill
// comes after the checkpoint committed.
func (s *killingStream) Recv(ctx context.Context) (model.Chunk, error) {
	s.n++
	switch s.n {
	case 1:
		return chunkText(checkpointed), nil
	case 2:
		return chunkText("."), nil // too short to be checkpointed
	}
	s.m.mu.Lock()
	ready := s.m.booted
	s.m.mu.Unlock()
	<-ready
	s.m.mu.Lock()
	s.m.current.Kill.Kill()
	s.m.mu.Unlock()
	<-ctx.Done()
	return model.Chunk{}, ctx.Err()
}

func (s *killingStream) Close() error { return nil }

// A model stream that crashes the instance on every boot, after a text
// checkpoint, ends the turn after the resume budget with
// failed{type:"aborted"}: neither the resumed execution's writes nor a
// checkpoint are progress (DESIGN: the budget counts resumes without
// progress, and only a completed step or a settled call is progress).
func TestStreamKillingInstanceAbortsAfterBudget(t *testing.T) {
	const budget = 3
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithResumeBudget(budget)
	m := &killingModel{}
	cfg := runner.NewConfig().WithCheckpoints(time.Hour, len(checkpointed))
	boot := func() *treetest.Node {
		m.mu.Lock()
		m.booted = make(chan struct{})
		m.mu.Unlock()
		n := tr.Boot(newRunner(t, m, cfg))
		m.mu.Lock()
		m.current = n
		close(m.booted)
		m.mu.Unlock()
		return n
	}
	n := boot()
	sid := n.NewSession("s")
	pid := n.Admit(sid, "crash mid-stream")
	boots := 1
	for len(treetest.Terminals(tr.Events(sid))) == 0 {
		require.Less(t, boots, budget+5, "the budget never ran out")
		<-n.Kill.Died()
		n.Crash()
		n = boot()
		boots++
	}
	n.Idle()
	assert.Equal(t, budget+2, boots, "the first run, the budget's resumes, then the next resume aborts")
	assert.Len(t, treetest.OfType(tr.Events(sid), event.TextCheckpoint), budget+1, "every run checkpointed before it was killed")
	requireAborted(t, tr, sid, pid)
}
