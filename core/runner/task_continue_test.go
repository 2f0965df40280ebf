package runner_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A foreground task call that an operator rule makes ask, once
// approved, must still wait for its child and settle with the child's
// answer (DESIGN §10), not be run as a background body.
func TestApprovedForegroundTaskWaitsForChild(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "task", Resource: "*", Decision: permission.Ask}})
	n := tr.Boot(taskRunner(t, tr, m, cfg))
	sid := n.NewSession("root")
	pid := n.Admit(sid, fgPrompt)
	n.Idle()

	bs := permissions(t, n, sid)
	require.Len(t, bs, 1, "the task call asks first")
	_, err := n.Inst.Reply(ctx, sid, bs[0].ID, permReply("r1", "once", ""))
	require.NoError(t, err)
	n.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	sets := settlements(t, tr.Events(sid))
	require.Len(t, sets, 1)
	assert.Equal(t, event.OutcomeOK, sets[0].Outcome)
	assert.Equal(t, "You said: hello child", sets[0].Output, "the parent's call settles with the child's answer")
}

// The approved foreground task call killed before and after each commit
// from the approval on (the child's start, the park on its task blocker,
// the child's turn, the parent's continuation): after a reboot and the
// client's retried reply there is one child, the parent's call settles
// once with the child's answer, through task blocker t-{call}-1 (the
// ordinal after the approving permission request p-{call}-0).
func TestApprovedForegroundTaskKilledAtEveryCommit(t *testing.T) {
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "task", Resource: "*", Decision: permission.Ask}})
	killEveryCommitAfterReply(t, killAfterReply{
		reply: permReply("r1", "once", ""),
		ask: func(t *testing.T, tr *treetest.Tree, m model.Model) (*treetest.Node, core.Blocker) {
			n := tr.Boot(taskRunner(t, tr, m, cfg))
			n.NewSession("root")
			n.Admit("root", fgPrompt)
			n.Idle()
			bs := permissions(t, n, "root")
			require.Len(t, bs, 1)
			return n, bs[0]
		},
		runner: func(t *testing.T, tr *treetest.Tree, m model.Model) *runner.Runner {
			return taskRunner(t, tr, m, cfg)
		},
		check: func(t *testing.T, tr *treetest.Tree) {
			evs := childAnsweredOnce(t, tr)
			var ids []string
			for _, ev := range treetest.OfType(evs, event.TaskResolved) {
				var r event.Resolution
				require.NoError(t, ev.Decode(&r))
				ids = append(ids, r.BlockerID)
			}
			assert.Equal(t, []string{core.BlockerID("t", settlements(t, evs)[0].CallID, 1)}, ids, "one task blocker, resolved once, id stable across the kill")
		},
	})
}

// Cancelling a sub-agent's question ends the child's turn, which
// resolves the parent's waiting task call and takes the parent's claim in
// the reply's transaction. The parent goes on here at once, as after
// Interrupt (afterChildTurn), not only at the next wake-up.
func TestCancelledChildQuestionContinuesParentHere(t *testing.T) {
	tr := treetest.New(t)
	n, q := askingChild(t, tr, offline.New(nil, offline.Options{}))
	_, err := n.Inst.Reply(ctx, "root", q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true})
	require.NoError(t, err)
	n.Idle()

	require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended")
	assert.Len(t, treetest.Terminals(tr.Events("root")), 1, "the parent went on and ended without waiting for a wake-up")
	assert.False(t, tr.Claim("root").Exists, "no parent claim left waiting for the sweep")
	// Not stranded: a wake-up is armed, so the sweep goes on with it up to
	// the wake interval (10 s by default) later.
	assert.NotZero(t, tr.Wake.At(), "a wake-up is armed for the parent's claim")
}

// delegate is an embedder's sub-agent tool with its own argument names:
// {"job": PROMPT, "later": BOOL}.
type delegate struct{ tool.Subagent }

func (delegate) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "delegate", Description: "sub-agent", Schema: json.RawMessage(`{"type":"object"}`)}
}

// Permission: it runs unasked, as the built-in task tool does.
func (delegate) Permission() string { return "allow" }

func (delegate) ParseTask(args json.RawMessage) (tool.TaskArgs, error) {
	var a struct {
		Job   string `json:"job"`
		Later bool   `json:"later"`
	}
	err := json.Unmarshal(args, &a)
	return tool.TaskArgs{Prompt: a.Job, Background: a.Later}, err
}

// Whether a task call is in the background is decided once, by the tool's
// ParseTask when its child starts (session.job.started@1 carries it, the
// jobs row keeps it), never re-read from the call's arguments: a sub-agent
// tool whose arguments say it otherwise than {"background": true} (here an
// embedder's; before, also a Titlecase or duplicate key that Go and SQLite
// read differently) must not make a background child that the parent's
// turn end treats as a foreground job, whose completion notice would never
// reach the parent.
func TestTaskBackgroundReadOnce(t *testing.T) {
	for name, call := range map[string]string{
		"task":     `task {"prompt":"/sleep 30s","background":true}`,
		"delegate": `delegate {"job":"/sleep 30s","later":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			tr := treetest.New(t)
			m := &countingModel{inner: offline.New(tr.Clock, offline.Options{}), tr: tr}
			n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), delegate{tool.Task()}))
			sid := n.NewSession("root")
			sub := n.Inst.Subscribe(sid, 1024)
			pid := n.Admit(sid, "/tool "+call)
			// The parent's turn ends while the child sleeps.
			awaitEvent(t, sub, func(ev event.Event) bool { return ev.IsTerminal() || ev.Type == event.StepParked })
			sub.Close()
			require.Equal(t, "succeeded", tr.PromptState(pid))
			tr.Clock.BlockUntil(3) // the child sleeps: wall, idle and sleep timers
			tr.Clock.Advance(30 * time.Second)
			n.Idle()

			require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended")
			assert.Equal(t, "succeeded", prompts(tr, sid)[core.NoticeClientID("root.1", 1)], "the background child's notice reached the parent")
		})
	}
}

// Arguments that Go's decoder and SQLite's json_extract read differently
// (a Titlecase key, a duplicate key) are refused by the task tool as a tool
// error the model can correct: no child starts.
func TestTaskAmbiguousArgumentsRefused(t *testing.T) {
	for name, args := range map[string]string{
		"Titlecase": `{"prompt":"hello child","Background":true}`,
		"duplicate": `{"prompt":"hello child","background":false,"background":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			tr := treetest.New(t)
			m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
			n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig()))
			sid := n.NewSession("root")
			pid := n.Admit(sid, "/tool task "+args)
			n.Idle()

			assert.Equal(t, "succeeded", tr.PromptState(pid))
			assert.Equal(t, []string{"root"}, sessionsOf(tr), "no child started")
			sets := settlements(t, tr.Events(sid))
			require.Len(t, sets, 1)
			assert.Equal(t, event.OutcomeError, sets[0].Outcome)
			assert.Contains(t, sets[0].Output, "task: ")
		})
	}
}
