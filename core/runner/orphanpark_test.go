package runner_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// gatedModel holds the child's first model request until release is
// closed, telling requested when it arrives.
type gatedModel struct {
	inner     model.Model
	prompt    string // the child's task prompt
	requested chan struct{}
	release   chan struct{}
	once      sync.Once
}

func (m *gatedModel) Name() string { return "gated" }

func (m *gatedModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Text == m.prompt {
		first := false
		m.once.Do(func() { first = true })
		if first {
			close(m.requested)
			select {
			case <-m.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return m.inner.Stream(ctx, req)
}

// windowDB lets the first transaction begun after armed is set wait, before
// it runs, for stop to return: the window between a commit and the next
// transaction of the same goroutine, held open for another goroutine.
type windowDB struct {
	storage.DB
	armed atomic.Bool
	stop  func()
	after func(*windowDB) // run after every transaction that committed
}

func (d *windowDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	if d.armed.CompareAndSwap(true, false) {
		d.stop()
	}
	err := d.DB.Tx(ctx, fn)
	if err == nil {
		d.after(d)
	}
	return err
}

// A foreground child whose step completes, and whose park then commits
// after its parent's interrupt committed but before that interrupt
// interrupted the running child (interruptChildren lists only children
// holding a claim, and the park has just released it), must not be left
// parked on its question: its job has ended, nothing waits for it, and a
// reply would continue a child whose job ended (DESIGN §10; docs/api.md:
// interrupting the parent interrupts its foreground children, "a child
// continuing from its own question's reply included"). Found by the
// simulator, seed 4 (tree0183). With kill=true the instance dies right
// after, and the reply goes to the next one.
func TestChildParkAfterParentInterruptIsInterrupted(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			tr := treetest.New(t)
			m := &gatedModel{inner: offline.New(nil, offline.Options{}), prompt: "/ask which colour?",
				requested: make(chan struct{}), release: make(chan struct{})}

			var rootParked, rootInterrupted, childParked, windowed atomic.Bool
			parked := make(chan struct{})        // the root's park committed
			childParkDone := make(chan struct{}) // the child's park committed
			var parkedOnce, childOnce sync.Once
			tr.Cfg = tr.Cfg.WithCommitHook(func(_ storage.Tx, ev event.Event) error {
				switch {
				case ev.SessionID == "root" && ev.Type == event.StepParked:
					rootParked.Store(true)
				case ev.SessionID == "root" && ev.Type == event.ExecutionInterrupted:
					rootInterrupted.Store(true)
				case ev.SessionID == "root.1" && ev.Type == event.StepParked:
					childParked.Store(true)
				}
				return nil
			})
			wait := func(what string, c <-chan struct{}) {
				t.Helper()
				select {
				case <-c:
				case <-time.After(30 * time.Second): // only to fail instead of hanging
					t.Fatalf("timed out waiting for %s", what)
				}
			}
			db := &windowDB{
				// The root's interrupt committed: its next transaction (the
				// list of children to interrupt) waits until the child,
				// released now, has completed its step and parked.
				stop: func() {
					close(m.release)
					wait("the child's park", childParkDone)
				},
				after: func(db *windowDB) {
					if rootParked.Load() {
						parkedOnce.Do(func() { close(parked) })
					}
					if rootInterrupted.Load() && !windowed.Swap(true) {
						db.armed.Store(true)
					}
					if childParked.Load() {
						childOnce.Do(func() { close(childParkDone) })
					}
				},
			}

			host, _, kdb := tr.Host()
			db.DB = host.DB
			host.DB = db
			inst, _, err := recovery.Boot(ctx, host, tr.Cfg, taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
			require.NoError(t, err)
			first := inst
			t.Cleanup(func() { kdb.Kill(); first.Abandon() })
			_, err = inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
			require.NoError(t, err)
			_, err = inst.Admit(ctx, "root", core.PromptInput{Text: askChild})
			require.NoError(t, err)
			wait("the root's park on its child", parked)
			wait("the child's model request", m.requested)

			did, err := inst.Interrupt(ctx, "root", event.ReasonUser)
			require.NoError(t, err)
			require.True(t, did)
			idle(t, inst)
			require.True(t, childParked.Load(), "the child parked after the root's interrupt")

			if kill {
				kdb.Kill()
				inst.Abandon()
				inst = tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), runner.NewConfig(), tool.QuestionTool())).Inst
			}
			qs, err := inst.Blockers(ctx, "root", event.KindQuestion)
			require.NoError(t, err)
			assert.Empty(t, qs, "no question of the child is left pending")
			child := tr.Events("root.1")
			q := treetest.OfType(child, event.StepParked)
			require.Len(t, q, 1)
			var p event.Parked
			require.NoError(t, q[0].Decode(&p))
			require.Len(t, p.Blockers, 1)
			_, err = inst.Reply(ctx, "root", p.Blockers[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "late", Answers: [][]string{{"green"}}})
			assert.ErrorIs(t, err, core.ErrConflict, "the child's question takes no reply once its job ended")
			idle(t, inst)

			child = tr.Events("root.1")
			for _, sid := range []string{"root", "root.1"} {
				terms := treetest.Terminals(tr.Events(sid))
				require.Len(t, terms, 1, sid)
				assert.Equal(t, event.ExecutionInterrupted, terms[0].Type, sid)
			}
			assert.Zero(t, startedWith(t, child, event.CauseResolution), "the child is not continued after its job ended")
			cancelled := treetest.OfType(child, event.QuestionCancelled)
			require.Len(t, cancelled, 1)
			var res event.Resolution
			require.NoError(t, cancelled[0].Decode(&res))
			assert.Equal(t, event.CancelInterrupt, res.Reason, "the question is cancelled by the interrupt")
			// The parent's interrupt ended the job: the child's turn ends
			// for the user's reason, as its parent's did, not as an orphan.
			for _, sid := range []string{"root", "root.1"} {
				var in event.Interrupted
				require.NoError(t, treetest.Terminals(tr.Events(sid))[0].Decode(&in))
				assert.Equal(t, event.ReasonUser, in.Reason, sid)
			}
			assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
			noClaims(t, tr)
			rebuildEquals(t, tr)
		})
	}
}

func idle(t *testing.T, inst *core.Instance) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second) // only to fail instead of hanging
	defer cancel()
	require.NoError(t, inst.WaitIdle(c), "executions still running")
}
