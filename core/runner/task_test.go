package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// countingModel is the offline model counting requests per (prompt, step)
// and flagging a request for a step already recorded complete.
type countingModel struct {
	inner      model.Model
	tr         *treetest.Tree
	mu         sync.Mutex
	violations []string
}

func (m *countingModel) Name() string { return "counting" }

func (m *countingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	prompt, k := "", 1
	for _, msg := range req.Messages {
		switch {
		case msg.Role == model.RoleUser && !msg.Notice:
			prompt, k = msg.Text, 1
		case msg.Role == model.RoleTool:
			k++
		}
	}
	var done int
	m.tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM steps s JOIN prompts p ON p.id = s.prompt_id WHERE p.text = ? AND s.state = 'completed'`, []any{prompt}, &done)
		return err
	})
	if done >= k {
		m.mu.Lock()
		m.violations = append(m.violations, fmt.Sprintf("step %d of %q requested after it was recorded", k, prompt))
		m.mu.Unlock()
	}
	return m.inner.Stream(ctx, req)
}

func (m *countingModel) Violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.violations...)
}

func taskRunner(t *testing.T, tr *treetest.Tree, m model.Model, cfg runner.Config, extra ...tool.Tool) *runner.Runner {
	return newRunner(t, m, cfg, append([]tool.Tool{tool.Task()}, extra...)...)
}

func sessionsOf(tr *treetest.Tree) []string {
	var ids []string
	tr.Read(func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT id FROM sessions ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids
}

func jobStates(tr *treetest.Tree) map[string]string {
	out := map[string]string{}
	tr.Read(func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT child_id, state FROM jobs`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, s string
			if err := rows.Scan(&id, &s); err != nil {
				return err
			}
			out[id] = s
		}
		return nil
	})
	return out
}

func noClaims(t *testing.T, tr *treetest.Tree) {
	t.Helper()
	var n int
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM claims`, nil, &n)
		return err
	})
	assert.Zero(t, n, "no claim left")
}

const fgPrompt = "/task hello child\nparent words"

// A foreground task call runs the child to its end and hands its answer to
// the parent as the call's result; the child is {root}.1 and shows in the
// parent's snapshot.
func TestForegroundTaskHandsChildAnswerToParent(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig()))
	sid := n.NewSession("root")
	pid := n.Admit(sid, fgPrompt)
	n.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr))
	sets := settlements(t, tr.Events(sid))
	require.Len(t, sets, 1)
	assert.Equal(t, event.OutcomeOK, sets[0].Outcome)
	assert.Equal(t, "You said: hello child", sets[0].Output)
	require.Len(t, treetest.Terminals(tr.Events("root.1")), 1)
	assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
	assert.Empty(t, m.Violations())
	noClaims(t, tr)

	snap, err := n.Inst.Snapshot(ctx, sid, 0, 50)
	require.NoError(t, err)
	require.Len(t, snap.Children, 1)
	assert.Equal(t, "root.1", snap.Children[0].ID)
	assert.Equal(t, core.JobEnded, snap.Children[0].Job)
	assert.Equal(t, core.StatusIdle, snap.Children[0].Status)
	assert.Equal(t, 1, snap.Children[0].Turns)
}

// The foreground crash test: count the commits of a clean parent turn with
// one foreground child, then kill before and after each commit (of the
// parent's turn, the child's turn and the parent's resumption), boot over
// the same file, and check: one child, its turn ended once, the parent's
// call settled once with the child's answer, the parent's turn ended once,
// no model step of either requested after it was recorded.
func TestForegroundTaskKilledAtEveryCommit(t *testing.T) {
	clean := treetest.New(t)
	cm := &countingModel{inner: offline.New(nil, offline.Options{}), tr: clean}
	n := clean.Boot(taskRunner(t, clean, cm, runner.NewConfig()))
	n.NewSession("root")
	base := n.Kill.Commits()
	_, err := n.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: fgPrompt})
	require.NoError(t, err)
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Greater(t, commits, 10)

	for i := 1; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				tr := treetest.New(t)
				m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
				n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig()))
				n.NewSession("root")
				n.Kill.KillAt(i, after)
				_, _ = n.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: fgPrompt})
				<-n.Kill.Died()
				n.Crash()

				n2 := tr.Boot(taskRunner(t, tr, m, runner.NewConfig()))
				_, err := n2.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: fgPrompt})
				require.NoError(t, err)
				n2.Idle()

				assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr), "one child, re-attached")
				require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended once")
				evs := tr.Events("root")
				terms := treetest.Terminals(evs)
				require.Len(t, terms, 1)
				assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
				sets := settlements(t, evs)
				require.Len(t, sets, 1, "the parent got exactly one result")
				assert.Equal(t, "You said: hello child", sets[0].Output)
				assert.Len(t, treetest.OfType(evs, event.JobStarted), 1)
				assert.Empty(t, m.Violations())
				noClaims(t, tr)
			})
		}
	}
}

// A task from a session at the depth limit fails with a clear tool error and
// creates nothing; an empty prompt likewise.
func TestTaskDepthLimitAndEmptyPrompt(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), runner.NewConfig().WithTaskDepth(2)))
	sid := n.NewSession("root")
	// root → root.1 → root.2 → (depth 3: refused)
	pid := n.Admit(sid, "/task /task /task too deep")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr))
	sets := settlements(t, tr.Events("root.2"))
	require.Len(t, sets, 1)
	assert.Equal(t, event.OutcomeError, sets[0].Outcome)
	assert.Contains(t, sets[0].Output, "sub-agents may nest 2 deep")

	tr2 := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall("task", `{"prompt":"  "}`)}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n2 := tr2.Boot(taskRunner(t, tr2, m, runner.NewConfig()))
	n2.NewSession("r")
	n2.Admit("r", "go")
	n2.Idle()
	assert.Equal(t, []string{"r"}, sessionsOf(tr2), "nothing created")
	sets = settlements(t, tr2.Events("r"))
	require.Len(t, sets, 1)
	assert.Equal(t, event.OutcomeError, sets[0].Outcome)
	assert.Contains(t, sets[0].Output, "prompt is empty")
	assert.Empty(t, jobStates(tr2))
}

// prompts reads a session's prompts: client id → state.
func prompts(tr *treetest.Tree, sid string) map[string]string {
	out := map[string]string{}
	tr.Read(func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT COALESCE(client_id, id), state FROM prompts WHERE session_id = ?`, sid)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, s string
			if err := rows.Scan(&id, &s); err != nil {
				return err
			}
			out[id] = s
		}
		return nil
	})
	return out
}

// A background child whose turn ends during a 90 s disk-full window: once
// storage returns, the parent's queue holds exactly one notice under the
// stable id, the job is settled, the notice's turn runs, and nothing is
// left claimed; with a kill during the window as well.
func TestBackgroundNoticeSurvivesFullDiskWindow(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			tr := treetest.New(t)
			fault := tr.Faults()
			gate := make(chan struct{})
			var once sync.Once
			fill := tool.Func{DefaultPermission: "allow", Name: "fill", Run: func(ctx context.Context, _ tool.Call) (string, error) {
				select {
				case <-gate:
				case <-ctx.Done():
					return "", ctx.Err()
				}
				once.Do(func() { fault.FailFor(90*time.Second, faultvfs.Full) })
				return "the disk is full now", nil
			}}
			m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
			n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), fill))
			sid := n.NewSession("root")
			sub := n.Inst.Subscribe(sid, 1024)
			pid := n.Admit(sid, "/task --background /tool fill {}")
			for ev := range sub.C { // the parent's first turn ends at once
				if ev.IsTerminal() {
					break
				}
			}
			sub.Close()
			assert.Equal(t, "succeeded", tr.PromptState(pid), "the background call did not hold the parent")
			assert.Equal(t, map[string]string{"root.1": "running"}, jobStates(tr))

			close(gate)
			var waits []retry.Wait
			if kill {
				killed := false
				waits = tr.DriveEach(n.Idle, func(w retry.Wait) {
					if !killed && w.Policy == "settlement" {
						killed = true
						n.Crash()
					}
				})
				tr.Clock.Advance(2 * time.Minute) // past the window
				n = tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), fill))
			}
			waits = append(waits, n.IdleDriving()...)
			require.NotEmpty(t, waits, "the outage was met")

			notice := core.NoticeClientID("root.1", 1)
			ps := prompts(tr, sid)
			assert.Len(t, ps, 2, "the task prompt and one notice: %v", ps)
			assert.Equal(t, "succeeded", ps[notice], "the notice was admitted once and its turn ran: %v", ps)
			assert.Len(t, treetest.OfType(tr.Events(sid), event.PromptAdmitted), 2)
			assert.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended once")
			assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr), "the job settled")
			assert.Empty(t, m.Violations())
			noClaims(t, tr)
		})
	}
}

// A foreground parent waiting for a child whose end storage refuses for
// the whole settlement window is woken by the job's in-memory settlement
// and settles its call instead of hanging.
func TestForegroundWaiterWokenWhenChildEndIsNotStored(t *testing.T) {
	tr := treetest.New(t)
	fault := tr.Faults()
	fill := tool.Func{DefaultPermission: "allow", Name: "fill", Run: func(context.Context, tool.Call) (string, error) {
		fault.FailFor(time.Hour, faultvfs.Full)
		return "full", nil
	}}
	n := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), runner.NewConfig(), fill))
	sid := n.NewSession("root")
	n.Admit(sid, "/task /tool fill {}")
	n.IdleDriving() // returns: neither the child nor the parent hangs
	assert.True(t, n.Inst.ReadOnly())
}

// startSleepingChild boots a tree whose root's foreground child sleeps in
// its model step (on the fake clock) and returns once the child's step has
// started.
func startSleepingChild(t *testing.T, tr *treetest.Tree) *treetest.Node {
	n := tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	n.NewSession("root")
	sub := n.Inst.Subscribe("root.1", 1024)
	defer sub.Close()
	n.Admit("root", "/task /sleep 1h")
	for ev := range sub.C {
		if ev.Type == event.StepStarted {
			return n
		}
	}
	t.Fatal("the child never started a step")
	return nil
}

// Interrupting the parent interrupts its foreground child: both turns end
// interrupted, the job ends, nothing stays claimed.
func TestInterruptingParentInterruptsForegroundChild(t *testing.T) {
	tr := treetest.New(t)
	n := startSleepingChild(t, tr)
	did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	n.Idle()
	for _, sid := range []string{"root", "root.1"} {
		terms := treetest.Terminals(tr.Events(sid))
		require.Len(t, terms, 1, sid)
		assert.Equal(t, event.ExecutionInterrupted, terms[0].Type, sid)
	}
	assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
	noClaims(t, tr)
}

// A child claim that no live job names (its parent's turn ended while the
// child's execution was dead) is released by the sweep, not resumed: the
// child's turn ends aborted and nothing of it runs again.
func TestStaleChildClaimReleasedNotResumed(t *testing.T) {
	tr := treetest.New(t)
	n := startSleepingChild(t, tr)
	n.Crash()

	// Budget 0: the sweep aborts the root's turn (its claim is older), which
	// ends the foreground job; the child's claim then has no live job.
	tr.Cfg = tr.Cfg.WithResumeBudget(0)
	n2 := tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	n2.Idle()
	assert.Equal(t, 1, n2.Report.Count(core.Release), "the child's claim released: %+v", n2.Report)
	child := tr.Events("root.1")
	assert.Empty(t, treetest.OfType(child, event.ExecutionResumed), "the child was not resumed")
	terms := treetest.Terminals(child)
	require.Len(t, terms, 1)
	var f event.Failed
	require.NoError(t, terms[0].Decode(&f))
	assert.Equal(t, core.OrphanMessage, f.Message)
	assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
	noClaims(t, tr)
}
