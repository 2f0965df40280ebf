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
	"github.com/revenantrt/revenant/recovery"
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
	// A request from an abandoned instance (its context cancelled before the
	// next node recorded the step, so before this read) is a zombie's, not a
	// repeat by a live owner: the runner checks its context just before the
	// request, but a zombie can pass that check before Abandon and get here
	// after the next node's record.
	if done >= k && ctx.Err() == nil {
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
	return pairsOf(tr, `SELECT child_id, state FROM jobs`)
}

// pairsOf reads a query of two text columns as a map from the first to
// the second.
func pairsOf(tr *treetest.Tree, query string, args ...any) map[string]string {
	out := map[string]string{}
	tr.Read(func(tx storage.Tx) error {
		rows, err := tx.Query(query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			out[k] = v
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

// killTaskTurnAtEveryCommit counts the commits of a clean run of prompt on
// the root "root" of a tree with the task runner (more than ten), then, for
// every commit and each side of it, kills a fresh tree there, boots it again
// over the same file, re-admits the prompt (the client retries), waits for
// idle and calls check; parked reports whether the root waited on its child
// when it died. A child that runs beside its parent may make a run commit
// fewer times than the clean one: then nothing dies, and the boot finds the
// work done.
func killTaskTurnAtEveryCommit(t *testing.T, prompt string, check func(t *testing.T, tr *treetest.Tree, m *countingModel, parked bool)) {
	killTaskTurnAtEveryCommitWith(t, runner.NewConfig(), prompt, check)
}

// killTaskTurnAtEveryCommitWith is killTaskTurnAtEveryCommit with the
// runner configured by cfg.
func killTaskTurnAtEveryCommitWith(t *testing.T, cfg runner.Config, prompt string, check func(t *testing.T, tr *treetest.Tree, m *countingModel, parked bool)) {
	clean := treetest.New(t)
	cm := &countingModel{inner: offline.New(nil, offline.Options{}), tr: clean}
	n := clean.Boot(taskRunner(t, clean, cm, cfg))
	n.NewSession("root")
	base := n.Kill.Commits()
	_, err := n.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: prompt})
	require.NoError(t, err)
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Greater(t, commits, 10)

	for i := 1; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				tr := treetest.New(t)
				m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
				n := tr.Boot(taskRunner(t, tr, m, cfg))
				n.NewSession("root")
				n.Kill.KillAt(i, after)
				_, _ = n.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: prompt})
				idle := make(chan error, 1)
				go func() { idle <- n.Inst.WaitIdle(context.Background()) }()
				select {
				case <-n.Kill.Died():
				case <-idle:
				}
				n.Crash()
				parked := pendingTask(tr, "root")

				n2 := tr.Boot(taskRunner(t, tr, m, cfg))
				_, err := n2.Inst.Admit(ctx, "root", core.PromptInput{ClientID: "p1", Text: prompt})
				require.NoError(t, err)
				n2.Idle()
				check(t, tr, m, parked)
				assert.Empty(t, m.Violations())
				noClaims(t, tr)
				rebuildEquals(t, tr)
			})
		}
	}
}

// The foreground crash test: kill before and after each commit (of the
// parent's turn, the child's turn and the parent's resumption) and check:
// one child, its turn ended once, the parent's call settled once with the
// child's answer, the parent's turn ended once, no model step of either
// requested after it was recorded.
func TestForegroundTaskKilledAtEveryCommit(t *testing.T) {
	killTaskTurnAtEveryCommit(t, fgPrompt, func(t *testing.T, tr *treetest.Tree, m *countingModel, parked bool) {
		evs := childAnsweredOnce(t, tr)
		assert.Len(t, treetest.OfType(evs, event.JobStarted), 1)
		assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution), "the parent continued once from the child's end")
		resumed := treetest.OfType(evs, event.ExecutionResumed)
		assert.LessOrEqual(t, len(resumed), 1)
		if parked {
			assert.Empty(t, resumed, "a parent parked on its child spends no resume")
		}
	})
}

// The background crash test: kill before and after each commit of a parent
// turn that starts one background child, of the child's turn, and of the
// parent's turn for the child's notice, and check: one child, its turn
// ended once, the parent's call settled once as started (a call cut between
// its executing record and the child's creation is run again with its key,
// never settled as of unknown outcome), one notice admitted and answered,
// every turn ended once.
func TestBackgroundTaskKilledAtEveryCommit(t *testing.T) {
	killTaskTurnAtEveryCommit(t, "/task --background hello child", func(t *testing.T, tr *treetest.Tree, m *countingModel, _ bool) {
		assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr), "one child, re-attached")
		require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended once")
		evs := tr.Events("root")
		sets := settlements(t, evs)
		require.Len(t, sets, 1, "the parent's call settled once")
		assert.Equal(t, event.OutcomeOK, sets[0].Outcome, sets[0].Output)
		assert.Contains(t, sets[0].Output, "Started background sub-agent root.1")
		ps := prompts(tr, "root")
		assert.Len(t, ps, 2, "the task prompt and one notice: %v", ps)
		assert.Equal(t, "succeeded", ps[core.NoticeClientID("root.1", 1)], "%v", ps)
		for _, term := range treetest.Terminals(evs) {
			assert.Equal(t, event.ExecutionSucceeded, term.Type)
		}
		assert.Len(t, treetest.OfType(evs, event.JobStarted), 1)
	})
}

// childAnsweredOnce checks a tree after fgPrompt's turn survived a kill:
// one child ("root.1", re-attached), whose turn ended once, and a root
// whose turn succeeded once with exactly one result, the child's answer.
// It returns the root's events.
func childAnsweredOnce(t *testing.T, tr *treetest.Tree) []event.Event {
	t.Helper()
	assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr), "one child, re-attached")
	require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended once")
	evs := tr.Events("root")
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
	sets := settlements(t, evs)
	require.Len(t, sets, 1, "the parent got exactly one result")
	assert.Equal(t, "You said: hello child", sets[0].Output)
	return evs
}

// pendingTask reports whether the session waits on a task blocker.
func pendingTask(tr *treetest.Tree, sid string) bool {
	var n int
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM blockers WHERE session_id = ? AND kind = 'task' AND state = 'pending'`, []any{sid}, &n)
		return err
	})
	return n > 0
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
	requireOneToolError(t, tr, "root.2", "sub-agents may nest 2 deep")

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
	requireOneToolError(t, tr2, "r", "prompt is empty")
	assert.Empty(t, jobStates(tr2))
}

// prompts reads a session's prompts: client id → state.
func prompts(tr *treetest.Tree, sid string) map[string]string {
	return pairsOf(tr, `SELECT COALESCE(client_id, id), state FROM prompts WHERE session_id = ?`, sid)
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
			awaitEvent(t, sub, event.Event.IsTerminal) // the parent's first turn ends at once
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

// A foreground child whose end storage refuses for the whole settlement
// window: nothing hangs (the parent is parked, no goroutine waits), the
// tree turns read-only, and once storage returns the sweep writes the
// child's failed{storage}, which resolves the parent's call: the parent
// gets that failure as its one result and ends its turn.
func TestForegroundChildEndStoredLateResolvesParent(t *testing.T) {
	tr := treetest.New(t)
	fault := tr.Faults()
	fill := tool.Func{DefaultPermission: "allow", Name: "fill", Run: func(context.Context, tool.Call) (string, error) {
		fault.FailFor(time.Hour, faultvfs.Full)
		return "full", nil
	}}
	m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), fill))
	sid := n.NewSession("root")
	pid := n.Admit(sid, "/task /tool fill {}")
	n.IdleDriving() // returns: neither the child nor the parent hangs
	assert.True(t, n.Inst.ReadOnly())
	assert.Equal(t, "running", tr.PromptState(pid), "the parent still waits")
	assert.False(t, tr.Claim(sid).Exists, "the parent is parked, not running")

	tr.Clock.Advance(2 * time.Hour) // storage is back
	_, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	n.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	requireOneToolError(t, tr, sid, "sub-agent root.1: The sub-agent's turn failed (storage)")
	assert.Equal(t, 1, startedWith(t, tr.Events(sid), event.CauseResolution))
	assert.Empty(t, m.Violations())
	noClaims(t, tr)
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
	awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == event.StepStarted })
	return n
}

// Interrupting the parent interrupts its foreground child: both turns end
// interrupted, the job ends, nothing stays claimed.
func TestInterruptingParentInterruptsForegroundChild(t *testing.T) {
	tr := treetest.New(t)
	n := startSleepingChild(t, tr)
	// The parent waits durably: parked on its child, holding no claim.
	snap, err := n.Inst.Snapshot(ctx, "root", 0, 50)
	require.NoError(t, err)
	assert.Equal(t, core.StatusWaiting, snap.Status)
	require.Len(t, snap.Blockers, 1)
	assert.Equal(t, event.KindTask, snap.Blockers[0].Kind)
	assert.False(t, tr.Claim("root").Exists)

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

// A child claim that no live job and no waiting parent call names (the
// instance died right after committing its parent's interrupt, before it
// interrupted the running child) is released by the sweep, not resumed:
// the child's turn ends aborted and nothing of it runs again.
func TestStaleChildClaimReleasedNotResumed(t *testing.T) {
	tr := treetest.New(t)
	n := startSleepingChild(t, tr)
	n.Kill.KillAt(1, true) // the root's interrupt commits, then the instance dies
	_, _ = n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	<-n.Kill.Died()
	n.Crash()
	require.True(t, tr.Claim("root.1").Exists, "the child's claim was left behind")

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

const askChild = "/task /ask which colour?"

// askingChild boots a tree whose root's foreground child parks on a
// question, and returns once both are parked, with the question.
func askingChild(t *testing.T, tr *treetest.Tree, m model.Model) (*treetest.Node, core.Blocker) {
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
	n.NewSession("root")
	n.Admit("root", askChild)
	n.Idle()
	qs := questions(t, n, "root")
	require.Len(t, qs, 1, "the child's question is listed on the root")
	require.Equal(t, "root.1", qs[0].SessionID)
	require.True(t, pendingTask(tr, "root"))
	return n, qs[0]
}

// A child parked on its question is "waiting" in its parent's list of
// children, as its own snapshot says: both derive the status the same way.
func TestChildWaitingOnQuestionIsWaitingInParentSnapshot(t *testing.T) {
	tr := treetest.New(t)
	n, _ := askingChild(t, tr, offline.New(nil, offline.Options{}))
	child, err := n.Inst.Snapshot(ctx, "root.1", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, core.StatusWaiting, child.Status)
	root, err := n.Inst.Snapshot(ctx, "root", 0, 10)
	require.NoError(t, err)
	require.Len(t, root.Children, 1)
	assert.Equal(t, core.JobRunning, root.Children[0].Job)
	assert.Equal(t, core.StatusWaiting, root.Children[0].Status, "the parent lists its child as the child's own snapshot does")
}

// A child that asks a question, with the instance killed at every commit
// from the reply to the end (commit01/after=true: right after the reply
// commits, the child's claim taken and its continuation not started): the
// next boot's sweep continues the child, since a live job and its parent's
// waiting call name it, never releasing it as an orphan; the reply sent
// again is the same reply; the child ends once and the parent gets exactly
// one result, with no model step of either requested twice.
func TestChildQuestionSurvivesKillAfterReply(t *testing.T) {
	killEveryCommitAfterReply(t, killAfterReply{
		reply: core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}},
		ask:   askingChild,
		killed: func(t *testing.T, tr *treetest.Tree, i int, after bool) {
			if i == 1 && after {
				require.True(t, tr.Claim("root.1").Exists, "the reply's claim")
				require.Empty(t, startedWith(t, tr.Events("root.1"), event.CauseResolution), "killed before the continuation started")
			}
		},
		check: func(t *testing.T, tr *treetest.Tree) {
			child := tr.Events("root.1")
			terms := treetest.Terminals(child)
			require.Len(t, terms, 1, "the child's turn ended once")
			assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
			assert.Len(t, treetest.OfType(child, event.QuestionAnswered), 1)
			evs := tr.Events("root")
			sets := settlements(t, evs)
			require.Len(t, sets, 1, "the parent got exactly one result")
			assert.Equal(t, event.OutcomeOK, sets[0].Outcome)
			assert.Contains(t, sets[0].Output, `"which colour?" → "green"`)
			require.Len(t, treetest.Terminals(evs), 1)
			assert.Equal(t, event.ExecutionSucceeded, treetest.Terminals(evs)[0].Type)
			assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution), "the parent continued once from the child's end")
		},
	})
}

// Interrupting a parent parked on a child that is itself parked on a
// question interrupts the child in the same transaction (nothing else
// would: it runs nowhere): both turns end interrupted, the question is
// cancelled and refuses a later reply, and nothing runs after, on this
// instance or, with a kill right after the interrupt commits, on the next.
func TestInterruptingParentParkedOnChild(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			tr := treetest.New(t)
			m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
			n, q := askingChild(t, tr, m)
			if kill {
				n.Kill.KillAt(1, true)
			}
			did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
			if kill {
				<-n.Kill.Died()
				n.Crash()
				n = tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
			} else {
				require.NoError(t, err)
				require.True(t, did)
			}
			n.Idle()
			for _, sid := range []string{"root", "root.1"} {
				evs := tr.Events(sid)
				terms := treetest.Terminals(evs)
				require.Len(t, terms, 1, sid)
				assert.Equal(t, event.ExecutionInterrupted, terms[0].Type, sid)
				for _, e := range evs {
					if e.Seq > terms[0].Seq {
						assert.Contains(t, []event.Type{event.JobEnded}, e.Type, "%s: nothing runs after the interrupt", sid)
					}
				}
			}
			assert.Len(t, treetest.OfType(tr.Events("root.1"), event.QuestionCancelled), 1)
			assert.Len(t, treetest.OfType(tr.Events("root"), event.TaskCancelled), 1)
			assert.Empty(t, questions(t, n, "root"))
			_, err = n.Inst.Reply(ctx, "root", q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "late", Answers: [][]string{{"green"}}})
			assert.ErrorIs(t, err, core.ErrConflict, "the cancelled question takes no reply")
			assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
			assert.Empty(t, m.Violations())
			noClaims(t, tr)
			rebuildEquals(t, tr)
		})
	}
}

// The reason a parked child's task turn ends with its parent's turn says
// why (endForegroundJobs, as endedJobReason for a running child):
// interrupted{reason:"user"} when the user interrupted the parent,
// interrupted{reason:"orphaned"} when the parent's turn ended another way, here failed (aborted: its claim outlived the maximum age
// while the server was down), with its step still running a slow call
// beside the task.
func TestParkedChildsTaskTurnEndsWithItsParentsReason(t *testing.T) {
	childEnd := func(t *testing.T, tr *treetest.Tree) event.Interrupted {
		t.Helper()
		terms := treetest.Terminals(tr.Events("root.1"))
		require.Len(t, terms, 1)
		require.Equal(t, event.ExecutionInterrupted, terms[0].Type)
		var in event.Interrupted
		require.NoError(t, terms[0].Decode(&in))
		assert.Len(t, treetest.OfType(tr.Events("root.1"), event.QuestionCancelled), 1)
		return in
	}
	t.Run("parent interrupted", func(t *testing.T) {
		tr := treetest.New(t)
		n, _ := askingChild(t, tr, offline.New(nil, offline.Options{}))
		did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
		require.NoError(t, err)
		require.True(t, did)
		n.Idle()
		assert.Equal(t, event.ReasonUser, childEnd(t, tr).Reason)
	})
	t.Run("parent failed", func(t *testing.T) {
		tr := treetest.New(t)
		tr.Cfg = tr.Cfg.WithMaxClaimAge(time.Minute)
		slow := tool.Func{DefaultPermission: "allow", Name: "slow", Run: func(ctx context.Context, _ tool.Call) (string, error) {
			<-ctx.Done() // runs until the crash
			return "", ctx.Err()
		}}
		root := rootScript{offline: offline.New(nil, offline.Options{}), script: &scriptModel{steps: func(k int) scriptStep {
			if k == 1 {
				return scriptStep{chunks: []model.Chunk{
					{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "task", Arguments: `{"prompt":"/ask which colour?"}`}},
					{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: "slow", Arguments: `{}`}},
					{Finish: model.FinishToolCalls},
				}}
			}
			return scriptStep{chunks: text("done")}
		}}}
		boot := func() *treetest.Node {
			return tr.Boot(taskRunner(t, tr, root, runner.NewConfig(), slow, tool.QuestionTool()))
		}
		n := boot()
		n.NewSession("root")
		sub := n.Inst.Subscribe("root.1", 1024)
		pid := n.Admit("root", "go")
		untilParked(t, sub)
		sub.Close()
		require.True(t, tr.Claim("root").Exists, "the parent still runs its slow call")
		require.False(t, tr.Claim("root.1").Exists, "the child is parked on its question")
		n.Crash()

		tr.Clock.Advance(2 * time.Minute)
		n2 := boot()
		n2.Idle()
		require.Equal(t, 1, n2.Report.Count(core.Abort), "%+v", n2.Report)
		assert.Equal(t, "failed", tr.PromptState(pid))
		assert.Equal(t, event.ReasonOrphaned, childEnd(t, tr).Reason)
		assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
		noClaims(t, tr)
	})
}

// A task blocker is resolved by its child's turn only: a client's reply is
// refused (409 on the generic path, 404 on the questions route) and writes
// nothing.
func TestTaskBlockerTakesNoReply(t *testing.T) {
	tr := treetest.New(t)
	n := startSleepingChild(t, tr)
	bs, err := n.Inst.Blockers(ctx, "root", event.KindTask)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	before := len(tr.Events("root"))
	_, err = n.Inst.Reply(ctx, "root", bs[0].ID, core.Reply{ResponseID: "r", Answers: [][]string{{"x"}}})
	assert.ErrorIs(t, err, core.ErrConflict)
	_, err = n.Inst.Reply(ctx, "root", bs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r", Answers: [][]string{{"x"}}})
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Len(t, tr.Events("root"), before, "nothing written")
	assert.True(t, pendingTask(tr, "root"))
}

// rootScript answers the root's prompt "go" with the script and every
// other prompt (the child's) with the offline model.
type rootScript struct {
	script  *scriptModel
	offline model.Model
}

func (m rootScript) Name() string { return "root-script" }

func (m rootScript) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	for _, msg := range req.Messages {
		if msg.Role == model.RoleUser && !msg.Notice {
			if msg.Text == "go" {
				return m.script.Stream(ctx, req)
			}
			break
		}
	}
	return m.offline.Stream(ctx, req)
}

// A child whose turn ends before its parent's step parks (the parent's
// other call of that step was still running): the child's terminal finds
// no blocker to resolve, so the park itself finds the child's stored end,
// resolves the task blocker and continues the turn at once, with the
// child's answer as the call's result and the child run once.
func TestForegroundChildEndingBeforeThePark(t *testing.T) {
	tr := treetest.New(t)
	gate := make(chan struct{})
	slow := tool.Func{DefaultPermission: "allow", Name: "slow", Run: func(ctx context.Context, _ tool.Call) (string, error) {
		select {
		case <-gate:
			return "slow done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	script := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "task", Arguments: `{"prompt":"hello child"}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: "slow", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("both ", "done")}
	}}
	n := tr.Boot(taskRunner(t, tr, rootScript{script: script, offline: offline.New(nil, offline.Options{})}, runner.NewConfig(), slow))
	sid := n.NewSession("root")
	sub := n.Inst.Subscribe("root.1", 1024)
	pid := n.Admit(sid, "go")
	awaitEvent(t, sub, event.Event.IsTerminal)
	sub.Close()
	require.False(t, pendingTask(tr, sid), "the child ended before the parent parked")
	close(gate)
	n.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	evs := tr.Events(sid)
	sets := settlements(t, evs)
	require.Len(t, sets, 2)
	byCall := map[string]string{}
	for _, s := range sets {
		byCall[s.Output] = s.Outcome
	}
	assert.Equal(t, event.OutcomeOK, byCall["You said: hello child"], "the child's answer is the call's result: %+v", sets)
	assert.Len(t, treetest.OfType(evs, event.TaskResolved), 1)
	assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
	assert.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child ran once")
	assert.Equal(t, 1, script.Requests(1))
	noClaims(t, tr)
}

// A resumed turn that parks on a step whose blockers are all resolved at
// commit (its foreground child ended before the crash) continues at once,
// and the continuation starts with a fresh budget: the park's transaction
// resets resume_attempts, so a kill right after it resumes at attempt 1,
// not at the count from before the park (DESIGN §6.3, §15 "budget carried
// over").
func TestParkContinuingAfterResumeResetsAttempts(t *testing.T) {
	tr := treetest.New(t)
	slow := tool.Func{DefaultPermission: "allow", Name: "slow", Run: func(ctx context.Context, _ tool.Call) (string, error) {
		<-ctx.Done() // runs until the crash; not idempotent, so the resume settles it unknown
		return "", ctx.Err()
	}}
	script := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "task", Arguments: `{"prompt":"hello child"}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: "slow", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{stall: true}
	}}
	root := rootScript{script: script, offline: offline.New(nil, offline.Options{})}
	n := tr.Boot(taskRunner(t, tr, root, runner.NewConfig(), slow))
	sid := n.NewSession("root")
	sub := n.Inst.Subscribe("root.1", 1024)
	n.Admit(sid, "go")
	awaitEvent(t, sub, event.Event.IsTerminal)
	sub.Close()
	require.False(t, pendingTask(tr, sid), "the child ended before the parent parked")
	n.Crash()

	// Resume (attempt 1), then die right after the third commit: the
	// sweep's resume, the recovery settlement of slow, and the park that
	// finds the child's end and starts the continuation.
	host, _, kdb := tr.Host()
	inst, _, err := recovery.BootWith(ctx, host, tr.Cfg, taskRunner(t, tr, root, runner.NewConfig(), slow), func(*core.Instance) error {
		kdb.KillAt(3, true)
		return nil
	})
	requireBootedOrKilled(t, inst, err)
	<-kdb.Died()
	inst.Abandon()
	evs := tr.Events(sid)
	require.Len(t, treetest.OfType(evs, event.ExecutionResumed), 1)
	var last event.Started
	require.Equal(t, event.ExecutionStarted, evs[len(evs)-1].Type, "died right after the park continued")
	require.NoError(t, evs[len(evs)-1].Decode(&last))
	require.Equal(t, event.CauseResolution, last.Cause)
	assert.Zero(t, tr.Claim(sid).Attempts, "the park reset the resume count")

	n3 := tr.Boot(taskRunner(t, tr, root, runner.NewConfig(), slow))
	resumed := treetest.OfType(tr.Events(sid), event.ExecutionResumed)
	require.Len(t, resumed, 2)
	var r event.Resumed
	require.NoError(t, resumed[1].Decode(&r))
	assert.Equal(t, 1, r.Attempt, "the continuation's budget starts afresh")
	n3.Crash()
}

// askAndTask is a root script whose first step asks a question and starts a
// foreground child (sleeping an hour on the fake clock) at once.
func askAndTask(tr *treetest.Tree) rootScript {
	return rootScript{offline: offline.New(tr.Clock, offline.Options{}), script: &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "task", Arguments: `{"prompt":"/sleep 1h"}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: tool.QuestionName, Arguments: colourQuestion}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("done")}
	}}}
}

// Cancelling a question of a step that also waits for a running child ends
// the parent's turn like an interrupt: the task blocker is cancelled with
// it and the child is interrupted before the reply answers; nothing stays
// claimed.
func TestQuestionCancelInterruptsRunningChild(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(taskRunner(t, tr, askAndTask(tr), runner.NewConfig(), tool.QuestionTool()))
	n.NewSession("root")
	rootSub := n.Inst.Subscribe("root", 1024)
	n.Admit("root", "go")
	untilParked(t, rootSub) // the parent's park commits after the child started
	rootSub.Close()
	qs := questions(t, n, "root")
	require.Len(t, qs, 1)
	q := qs[0]
	_, err := n.Inst.Reply(ctx, "root", q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r", Cancel: true})
	require.NoError(t, err)
	// Before the reply answers, not eventually: nothing else stops the
	// child before the sweep, so a reply that left it be would otherwise
	// be noticed only by n.Idle's 30 s limit.
	require.False(t, n.Inst.RunningHere("root.1"), "the child is stopped before the reply answers")
	n.Idle()
	for _, sid := range []string{"root", "root.1"} {
		terms := treetest.Terminals(tr.Events(sid))
		require.Len(t, terms, 1, sid)
		assert.Equal(t, event.ExecutionInterrupted, terms[0].Type, sid)
	}
	assert.Len(t, treetest.OfType(tr.Events("root"), event.TaskCancelled), 1)
	noClaims(t, tr)
}

// A foreground child that ends while a sibling blocker of the same step
// (a question) is still pending resolves its task blocker only: the parent
// takes no claim and starts no execution until the question is answered,
// then continues once (DESIGN §9: a step continues when all its blockers
// are resolved).
func TestChildEndingWhileSiblingQuestionPendingWaits(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(taskRunner(t, tr, askAndTask(tr), runner.NewConfig(), tool.QuestionTool()))
	n.NewSession("root")
	childSub := n.Inst.Subscribe("root.1", 1024)
	defer childSub.Close()
	rootSub := n.Inst.Subscribe("root", 1024)
	pid := n.Admit("root", "go")
	untilParked(t, rootSub)
	rootSub.Close()
	tr.Clock.BlockUntil(3) // the child sleeps in its step: wall, idle and sleep timers
	tr.Clock.Advance(time.Hour)
	for ev := range childSub.C {
		if ev.IsTerminal() {
			break
		}
	}
	n.Idle()

	evs := tr.Events("root")
	require.Len(t, treetest.OfType(evs, event.TaskResolved), 1, "the child's end resolved its blocker")
	require.False(t, pendingTask(tr, "root"))
	qs := questions(t, n, "root")
	require.Len(t, qs, 1, "the question is still pending")
	assert.False(t, tr.Claim("root").Exists, "the parent holds no claim while a sibling blocker is pending")
	assert.Zero(t, startedWith(t, evs, event.CauseResolution), "and starts no execution")
	assert.Empty(t, settlements(t, evs), "no call of the step settled yet")

	_, err := n.Inst.Reply(ctx, "root", qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}})
	require.NoError(t, err)
	n.Idle()
	evs = tr.Events("root")
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution), "the answer continues the turn once")
	assert.Len(t, settlements(t, evs), 2)
	noClaims(t, tr)
}

// A user's interrupt of the child itself resolves its parent's waiting
// call: the parent continues here (cause resolution) with a tool error
// saying the sub-agent's turn was interrupted, and ends its turn. Once
// for a running child (its execution records the interrupt) and once for
// a child parked on its own question (the interrupt is committed directly).
func TestInterruptingChildResolvesParent(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			tr := treetest.New(t)
			var n *treetest.Node
			if parked {
				n, _ = askingChild(t, tr, offline.New(nil, offline.Options{}))
			} else {
				n = startSleepingChild(t, tr)
			}
			did, err := n.Inst.Interrupt(ctx, "root.1", event.ReasonUser)
			require.NoError(t, err)
			require.True(t, did)
			n.Idle()
			evs := tr.Events("root")
			terms := treetest.Terminals(evs)
			require.Len(t, terms, 1)
			assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
			sets := settlements(t, evs)
			require.Len(t, sets, 1)
			assert.Equal(t, event.OutcomeError, sets[0].Outcome)
			assert.Equal(t, "sub-agent root.1: The sub-agent's turn ended interrupted.", sets[0].Output)
			assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
			noClaims(t, tr)
		})
	}
}

// A graceful stop while the parent waits for its running child records no
// cancellation: the child keeps its claim (shutdown), the parent stays
// parked; the next boot resumes the child, whose end continues the parent.
func TestForegroundTaskSurvivesGracefulStop(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	n.NewSession("root")
	sub := n.Inst.Subscribe("root", 1024)
	n.Admit("root", "/task /sleep 30s")
	// Once the root parked its timers are gone (as TestClientCannotTakeANoticesID
	// says, the clock counts every timer): the three are the child's.
	untilParked(t, sub)
	sub.Close()
	tr.Clock.BlockUntil(3) // the child sleeps in its step: wall, idle and sleep timers
	require.NoError(t, n.Inst.Close(ctx))
	require.Empty(t, treetest.OfType(tr.Events("root"), event.TaskCancelled))
	require.True(t, pendingTask(tr, "root"))
	require.True(t, tr.Claim("root.1").Exists, "the child keeps its claim")
	require.False(t, tr.Claim("root").Exists)

	n2 := tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	assert.Equal(t, 1, n2.Report.Count(core.Resume), "the child resumed: %+v", n2.Report)
	tr.Clock.BlockUntil(3)
	tr.Clock.Advance(30 * time.Second) // the child's /sleep
	n2.Idle()
	evs := tr.Events("root")
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
	sets := settlements(t, evs)
	require.Len(t, sets, 1)
	assert.Equal(t, "OK.", sets[0].Output)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "the parked parent spent no resume")
	noClaims(t, tr)
}

// A background child's notice that arrives while its parent is parked (on
// a foreground child asking a question) waits in the parent's queue,
// unclaimed, as any prompt admitted while parked: the parked turn is not
// started again for it. Once the question is answered the parent's turn
// continues and ends, and then the notice's turn runs.
func TestBackgroundNoticeWaitsWhileParentParked(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(tr.Clock, offline.Options{}), tr: tr}
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
	sid := n.NewSession("root")
	sub := n.Inst.Subscribe("root.2", 1024)
	root := n.Inst.Subscribe(sid, 1024)
	pid := n.Admit(sid, "/task --background /sleep 30s\n/task /ask which colour?")
	untilParked(t, sub) // the foreground child parks on its question
	sub.Close()
	untilParked(t, root) // and the root on it: neither holds a timer then
	root.Close()
	tr.Clock.BlockUntil(3) // the background child sleeps: wall, idle and sleep timers
	tr.Clock.Advance(30 * time.Second)
	n.Idle()

	notice := core.NoticeClientID("root.1", 1)
	require.Equal(t, "queued", prompts(tr, sid)[notice], "the notice waits behind the parked turn")
	assert.False(t, tr.Claim(sid).Exists, "a parked parent holds no claim")
	assert.Zero(t, startedWith(t, tr.Events(sid), event.CauseResolution), "the parked turn was not started for the notice")

	qs := questions(t, n, sid)
	require.Len(t, qs, 1)
	_, err := n.Inst.Reply(ctx, sid, qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r", Answers: [][]string{{"red"}}})
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, "succeeded", prompts(tr, sid)[notice])
	assert.Equal(t, 1, startedWith(t, tr.Events(sid), event.CauseResolution))
	assert.Empty(t, m.Violations())
	noClaims(t, tr)
	rebuildEquals(t, tr)
}

// requireOneToolError requires that session sid settled exactly one
// call, as a tool error whose output contains want: a refused task call.
func requireOneToolError(t *testing.T, tr *treetest.Tree, sid, want string) {
	t.Helper()
	sets := settlements(t, tr.Events(sid))
	require.Len(t, sets, 1, "%s settled one call", sid)
	assert.Equal(t, event.OutcomeError, sets[0].Outcome)
	assert.Contains(t, sets[0].Output, want)
}

// untilParked reads sub until a step of its session parks.
func untilParked(t testing.TB, sub *core.Subscription) {
	t.Helper()
	awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == event.StepParked })
}

// A client cannot take the client id a background child's notice will be
// admitted under: the id is predictable (the child's id and turn are in
// the snapshot), and a prompt already holding it made the child's end
// conflict with it, so the child's turn could never end (its terminal
// write failed each time). Such ids are refused at admission, and only
// those; the notice arrives as ever.
func TestClientCannotTakeANoticesID(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(tr.Clock, offline.Options{}), tr: tr}
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig()))
	sid := n.NewSession("root")
	sub := n.Inst.Subscribe(sid, 1024)
	pid := n.Admit(sid, "/task --background /sleep 30s")
	// The clock counts every timer: until the root's turn ended, its
	// steps' (wall, idle, a checkpoint's) and its task call's count too,
	// so three could be pending before the child set its sleep's timer,
	// which the Advance below then missed (the child slept on, and Idle
	// gave up). Once the root's turn ended, the three are the child's.
	awaitEvent(t, sub, func(ev event.Event) bool { return ev.IsTerminal() })
	sub.Close()
	tr.Clock.BlockUntil(3) // the background child sleeps: wall, idle and sleep timers

	notice := core.NoticeClientID("root.1", 1)
	_, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: notice, Text: "mine"})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `ids that begin with "notice-root."`)
	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: notice, Text: "mine", Mode: event.ModeReplace})
	require.ErrorIs(t, err, core.ErrInvalid, "a replace is refused the id as well")
	for _, own := range []string{"notice-1", "notice-root", "notice-other.1-1"} {
		_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: own, Text: "mine: " + own})
		require.NoError(t, err, "%s names no notice of root's children", own)
	}

	tr.Clock.Advance(30 * time.Second)
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, "succeeded", prompts(tr, sid)[notice], "the child's notice was admitted and ran")
	assert.Empty(t, m.Violations())
	noClaims(t, tr)
}

// The same holds one level down: a child's id is the root's, a dot and a
// number, whatever its depth, so the notice a grandchild sends its parent
// (a child) is named after the root too. A client's prompt to the child
// under that id is refused like one to the root. (The grandchild waits on
// a question, not a timer, so the test knows when it is waiting.)
func TestClientCannotTakeAGrandchildsNoticeID(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(tr.Clock, offline.Options{}), tr: tr}
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
	sid := n.NewSession("root")
	pid := n.Admit(sid, "/task --background /task --background /ask which colour?")
	n.Idle() // root and root.1 ended; root.1's background child root.2 waits for its answer

	notice := core.NoticeClientID("root.2", 1) // root.1's background child
	_, err := n.Inst.Admit(ctx, "root.1", core.PromptInput{ClientID: notice, Text: "mine"})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `ids that begin with "notice-root."`)

	qs, err := n.Inst.Blockers(ctx, "root.2", event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	_, err = n.Inst.Reply(ctx, "root.2", qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}})
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, "succeeded", prompts(tr, "root.1")[notice], "the grandchild's notice was admitted to root.1 and ran")
	assert.Empty(t, m.Violations())
	noClaims(t, tr)
}

// A foreground child whose resume budget is spent is aborted by the sweep
// (Resume with Abort), and its parent, waiting on it, goes on in that same
// recovery with the child's failure as the task's result: not at the next
// wake-up, a wake interval later.
func TestChildAbortedPastItsBudgetHandsItsParentOnAtOnce(t *testing.T) {
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithResumeBudget(0)
	n := startSleepingChild(t, tr)
	n.Crash()
	require.True(t, tr.Claim("root.1").Exists)
	require.False(t, tr.Claim("root").Exists, "the parent is parked on its child")

	n2 := tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig()))
	n2.Idle()
	require.Len(t, n2.Report.Decisions, 1)
	assert.True(t, n2.Report.Decisions[0].Abort, "the child's count passes its budget")
	child := treetest.Terminals(tr.Events("root.1"))
	require.Len(t, child, 1)
	assert.Equal(t, event.ExecutionFailed, child[0].Type)
	root := treetest.Terminals(tr.Events("root"))
	require.Len(t, root, 1, "the parent's turn went on and ended without another wake-up")
	assert.Equal(t, event.ExecutionSucceeded, root[0].Type)
	noClaims(t, tr)
}
