package runner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Sub-agents nest (DESIGN §10): a child's own task call makes a grandchild,
// {root}.2, whose end the child waits for (foreground) or hears of by a
// notice in its own queue (background), while the root waits for the
// child. These are the depth-1 tests one and two levels down: kills at
// every commit of the sessions' turns, questions asked below and answered
// on the root's path, interrupts of the root and of the middle of a
// chain, and a client's own prompt to a child kept through them.

// endedOnce asserts that session sid ran exactly its want turns, each
// ended once and succeeded.
func endedOnce(t *testing.T, tr *treetest.Tree, sid string, want int) {
	t.Helper()
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, want, "%s's turns ended once each", sid)
	for _, e := range terms {
		assert.Equal(t, event.ExecutionSucceeded, e.Type, "%s: %s", sid, e.Type)
	}
}

// A foreground chain, root → root.1 → root.2, killed at every commit: one
// child and one grandchild (re-attached, never made twice), each turn
// ended once, each waiting call settled once with the answer of the
// session below, the root parked on its child spending no resume, and no
// model step asked again after it was recorded.
func TestNestedForegroundTaskKilledAtEveryCommit(t *testing.T) {
	killTaskTurnAtEveryCommit(t, "/task /task hello grandchild\nroot words", func(t *testing.T, tr *treetest.Tree, m *countingModel, parked bool) {
		assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr), "one child, one grandchild")
		endedOnce(t, tr, "root.2", 1)
		endedOnce(t, tr, "root.1", 1)
		endedOnce(t, tr, "root", 1)
		grand := settlements(t, tr.Events("root.1"))
		require.Len(t, grand, 1, "the child's call settled once")
		assert.Equal(t, event.OutcomeOK, grand[0].Outcome)
		assert.Equal(t, "You said: hello grandchild", grand[0].Output)
		child := settlements(t, tr.Events("root"))
		require.Len(t, child, 1, "the root's call settled once")
		assert.Equal(t, event.OutcomeOK, child[0].Outcome)
		// The offline model's final answer after a tool call quotes it.
		assert.Equal(t, "Tool task returned: You said: hello grandchild", child[0].Output, "the root got the child's final answer")
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
		assert.Len(t, treetest.OfType(tr.Events("root"), event.JobStarted), 1)
		assert.Len(t, treetest.OfType(tr.Events("root.1"), event.JobStarted), 1)
		if parked {
			assert.Empty(t, treetest.OfType(tr.Events("root"), event.ExecutionResumed), "a root parked on its child spends no resume")
		}
	})
}

// A background grandchild of a foreground child, killed at every commit:
// the child's call returns at once, so the child's task turn and then the
// root's end without waiting for it; the grandchild's end admits exactly
// one notice, to the child (its parent), whose turn for it is the child's
// own and runs once; the root hears nothing of it.
func TestNestedBackgroundGrandchildKilledAtEveryCommit(t *testing.T) {
	killTaskTurnAtEveryCommit(t, "/task /task --background hello grandchild\nroot words", func(t *testing.T, tr *treetest.Tree, m *countingModel, _ bool) {
		assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr), "one child, one grandchild")
		endedOnce(t, tr, "root.2", 1)
		endedOnce(t, tr, "root.1", 2) // its task turn and the notice's
		endedOnce(t, tr, "root", 1)
		ps := prompts(tr, "root.1")
		assert.Len(t, ps, 2, "the task prompt and one notice: %v", ps)
		assert.Equal(t, "succeeded", ps[core.NoticeClientID("root.2", 1)], "%v", ps)
		assert.Len(t, prompts(tr, "root"), 1, "no notice reaches the root: %v", prompts(tr, "root"))
		sets := settlements(t, tr.Events("root.1"))
		require.Len(t, sets, 1, "the child's call settled once")
		assert.Contains(t, sets[0].Output, "Started background sub-agent root.2")
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
	})
}

// A question asked at depth 2 or 3 is listed on the root's path and
// answered there, with the instance killed at every commit from the reply
// to the end: the next boot's sweep continues the asker (a live job and a
// waiting call name it and each session above it), never releasing one of
// them as an orphan; the reply sent again is the same reply; each turn of
// the chain ends once and each waiting call settles once, carrying the
// answer up; no model step is requested twice.
func TestDeepQuestionSurvivesKillAfterReply(t *testing.T) {
	reply := core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}
	for _, depth := range []int{2, 3} {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			ask := func(t *testing.T, tr *treetest.Tree, m model.Model) (*treetest.Node, core.Blocker) {
				return chainAsking(t, tr, m, depth)
			}
			killEveryCommitAfterReply(t, killAfterReply{reply: reply, ask: ask, check: func(t *testing.T, tr *treetest.Tree) {
				sessions := chain(depth)
				assert.Equal(t, sessions, sessionsOf(tr), "one session per level, none made twice")
				for _, sid := range sessions {
					endedOnce(t, tr, sid, 1)
					sets := settlements(t, tr.Events(sid))
					require.Len(t, sets, 1, "%s's call settled once", sid)
					assert.Equal(t, event.OutcomeOK, sets[0].Outcome, sid)
					assert.Contains(t, sets[0].Output, `"which colour?" → "green"`, sid)
				}
				assert.Len(t, treetest.OfType(tr.Events(fmt.Sprintf("root.%d", depth)), event.QuestionAnswered), 1)
				assert.Equal(t, 1, startedWith(t, tr.Events("root"), event.CauseResolution), "the root continued once from its child's end")
			}})
		})
	}
}

// killAfterReply is a case of killEveryCommitAfterReply.
type killAfterReply struct {
	reply core.Reply
	// ask sets a tree up with a blocker pending and returns it.
	ask func(t *testing.T, tr *treetest.Tree, m model.Model) (*treetest.Node, core.Blocker)
	// runner is what boots after a kill; nil: taskRunner with the question
	// tool and runner.NewConfig(). It must be the runner ask boots.
	runner func(t *testing.T, tr *treetest.Tree, m model.Model) *runner.Runner
	// killed, when set, checks the tree a kill at commit i left, before
	// the next boot.
	killed func(t *testing.T, tr *treetest.Tree, i int, after bool)
	// check checks the tree once the retried reply is idle.
	check func(t *testing.T, tr *treetest.Tree)
}

// killEveryCommitAfterReply sets a tree up with c.ask (a blocker pending),
// replies to it once cleanly to count the commits up to idle, then for
// every commit and each side of it kills there, boots again (asserting
// the sweep released nothing as an orphan), replies again (the client
// retries) and calls c.check; no model step may be asked twice, no claim
// left, and the projections must rebuild from the log.
func killEveryCommitAfterReply(t *testing.T, c killAfterReply) {
	t.Helper()
	if c.runner == nil {
		c.runner = func(t *testing.T, tr *treetest.Tree, m model.Model) *runner.Runner {
			return taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool())
		}
	}
	clean := treetest.New(t)
	n, q := c.ask(t, clean, offline.New(nil, offline.Options{}))
	base := n.Kill.Commits()
	_, err := n.Inst.Reply(ctx, "root", q.ID, c.reply)
	require.NoError(t, err)
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Greater(t, commits, 5)

	for i := 1; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				tr := treetest.New(t)
				m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
				n, q := c.ask(t, tr, m)
				n.Kill.KillAt(i, after)
				_, _ = n.Inst.Reply(ctx, "root", q.ID, c.reply)
				<-n.Kill.Died()
				n.Crash()
				if c.killed != nil {
					c.killed(t, tr, i, after)
				}

				n2 := tr.Boot(c.runner(t, tr, m))
				assert.Zero(t, n2.Report.Count(core.Release), "nothing released as an orphan: %+v", n2.Report)
				_, err := n2.Inst.Reply(ctx, "root", q.ID, c.reply) // the client retries its reply
				require.NoError(t, err)
				n2.Idle()
				c.check(t, tr)
				assert.Empty(t, m.Violations())
				noClaims(t, tr)
				rebuildEquals(t, tr)
			})
		}
	}
}

// chainAsking boots a tree whose root's foreground chain of depth sessions
// ends in one parked on a question, and returns once all are parked.
func chainAsking(t *testing.T, tr *treetest.Tree, m model.Model, depth int) (*treetest.Node, core.Blocker) {
	t.Helper()
	n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
	n.NewSession("root")
	n.Admit("root", strings.Repeat("/task ", depth)+"/ask which colour?")
	n.Idle()
	qs := questions(t, n, "root")
	require.Len(t, qs, 1, "the question is listed on the root")
	require.Equal(t, fmt.Sprintf("root.%d", depth), qs[0].SessionID)
	return n, qs[0]
}

// chain is the sessions of a chain of depth: root, root.1, … root.depth.
func chain(depth int) []string {
	out := []string{"root"}
	for d := 1; d <= depth; d++ {
		out = append(out, fmt.Sprintf("root.%d", d))
	}
	return out
}

// nothingAfterEnd asserts that sid's one turn ended with typ (and reason,
// for an interrupt) and that nothing of it ran after: only job ends may
// follow in its log.
func nothingAfterEnd(t *testing.T, tr *treetest.Tree, sid string, typ event.Type, reason string) {
	t.Helper()
	evs := tr.Events(sid)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1, sid)
	assert.Equal(t, typ, terms[0].Type, sid)
	if typ == event.ExecutionInterrupted {
		var in event.Interrupted
		require.NoError(t, terms[0].Decode(&in))
		assert.Equal(t, reason, in.Reason, sid)
	}
	for _, e := range evs {
		if e.Seq > terms[0].Seq {
			assert.Equal(t, event.JobEnded, e.Type, "%s: nothing runs after its end", sid)
		}
	}
}

// Interrupting the root of a foreground chain parked on a question at
// depth 2 or 3, with the instance killed at every commit of the
// interrupt: every turn of the chain ends interrupted{user} and nothing of
// it runs after, the question is cancelled and takes no later reply, every
// task blocker is cancelled, every job ended, no claim is left.
func TestInterruptingARootParkedOnADeepChain(t *testing.T) {
	for _, depth := range []int{2, 3} {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			killEveryCommitOf(t, depth, func(n *treetest.Node) {
				_, _ = n.Inst.Interrupt(ctx, "root", event.ReasonUser)
			}, func(t *testing.T, tr *treetest.Tree, n *treetest.Node, q core.Blocker) {
				jobs := map[string]string{}
				for d, sid := range chain(depth) {
					nothingAfterEnd(t, tr, sid, event.ExecutionInterrupted, event.ReasonUser)
					if d < depth {
						assert.Len(t, treetest.OfType(tr.Events(sid), event.TaskCancelled), 1, sid)
					}
					if d > 0 {
						jobs[sid] = "ended"
					}
				}
				assert.Len(t, treetest.OfType(tr.Events(q.SessionID), event.QuestionCancelled), 1)
				assert.Empty(t, questions(t, n, "root"))
				_, err := n.Inst.Reply(ctx, "root", q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "late", Answers: [][]string{{"green"}}})
				assert.ErrorIs(t, err, core.ErrConflict, "the cancelled question takes no reply")
				assert.Equal(t, jobs, jobStates(tr))
			})
		})
	}
}

// killEveryCommitOf runs act on a fresh parked chain of depth (set up by
// chainAsking) once cleanly to count its commits up to idle, then, with
// no kill and for every commit and each side of it, kills there, boots
// again, calls act again (the client retries what got no answer) and
// check.
func killEveryCommitOf(t *testing.T, depth int, act func(n *treetest.Node), check func(t *testing.T, tr *treetest.Tree, n *treetest.Node, q core.Blocker)) {
	clean := treetest.New(t)
	n, _ := chainAsking(t, clean, offline.New(nil, offline.Options{}), depth)
	base := n.Kill.Commits()
	act(n)
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Positive(t, commits)
	for i := 0; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			if i == 0 && after {
				continue
			}
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				tr := treetest.New(t)
				m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
				n, q := chainAsking(t, tr, m, depth)
				if i > 0 {
					n.Kill.KillAt(i, after)
					act(n)
					<-n.Kill.Died()
					n.Crash()
					n = tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
				}
				act(n)
				n.Idle()
				check(t, tr, n, q)
				assert.Empty(t, m.Violations())
				noClaims(t, tr)
				rebuildEquals(t, tr)
			})
		}
	}
}

// Interrupting the middle of a parked chain (root → root.1 → root.2, the
// grandchild parked on a question), killed at every commit: the child's
// task turn and the grandchild's end interrupted{user}, the question is
// cancelled, and the root, whose call waited for the child, gets the
// child's end as its call's result and goes on to succeed, once.
func TestInterruptingTheMiddleOfADeepChain(t *testing.T) {
	killEveryCommitOf(t, 2, func(n *treetest.Node) {
		_, _ = n.Inst.Interrupt(ctx, "root.1", event.ReasonUser)
	}, func(t *testing.T, tr *treetest.Tree, n *treetest.Node, q core.Blocker) {
		nothingAfterEnd(t, tr, "root.2", event.ExecutionInterrupted, event.ReasonUser)
		nothingAfterEnd(t, tr, "root.1", event.ExecutionInterrupted, event.ReasonUser)
		endedOnce(t, tr, "root", 1)
		sets := settlements(t, tr.Events("root"))
		require.Len(t, sets, 1, "the root's call settled once")
		assert.Equal(t, event.OutcomeError, sets[0].Outcome)
		assert.Contains(t, sets[0].Output, "sub-agent root.1")
		assert.Equal(t, 1, startedWith(t, tr.Events("root"), event.CauseResolution), "the root continued once")
		assert.Len(t, treetest.OfType(tr.Events("root.2"), event.QuestionCancelled), 1)
		assert.Empty(t, questions(t, n, "root"))
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
	})
}

// A prompt a client sent the child of a parked chain is the child's own:
// interrupting the root, killed at every commit, ends the child's task
// turn and the grandchild's (interrupted{user}) but not that prompt, which
// runs next as a turn of the child's own and succeeds once.
func TestRootInterruptKeepsAChildsOwnPromptUnderADeepChain(t *testing.T) {
	killEveryCommitOf(t, 2, func(n *treetest.Node) {
		// Sent again after a kill: the same prompt (the check below finds
		// it admitted once and run).
		_, _ = n.Inst.Admit(ctx, "root.1", core.PromptInput{ClientID: "mine", Text: "my own words"})
		_, _ = n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	}, func(t *testing.T, tr *treetest.Tree, n *treetest.Node, q core.Blocker) {
		nothingAfterEnd(t, tr, "root", event.ExecutionInterrupted, event.ReasonUser)
		nothingAfterEnd(t, tr, "root.2", event.ExecutionInterrupted, event.ReasonUser)
		terms := treetest.Terminals(tr.Events("root.1"))
		require.Len(t, terms, 2, "the child's task turn and its own")
		assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
		assert.Equal(t, event.ExecutionSucceeded, terms[1].Type)
		ps := prompts(tr, "root.1")
		assert.Equal(t, "succeeded", ps["mine"], "%v", ps)
		assert.Len(t, ps, 2, "%v", ps)
		assert.Empty(t, questions(t, n, "root"))
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
	})
}

// A background child's foreground grandchild that asks: the root's turn
// ends at once (the call returns), and the root's interrupt, an idle
// root's, leaves the whole background subtree waiting; the question is
// still listed on the root's path and answered there, with the instance
// killed at every commit from the reply to the end: the grandchild and
// the child each end once, succeeded, the child's call settles once with
// the answer, and the child's end admits exactly one notice to the root,
// whose turn for it runs once.
func TestBackgroundChildsAskingGrandchildOutlivesTheRootsInterrupt(t *testing.T) {
	reply := core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}
	ask := func(t *testing.T, tr *treetest.Tree, m model.Model) (*treetest.Node, core.Blocker) {
		t.Helper()
		n := tr.Boot(taskRunner(t, tr, m, runner.NewConfig(), tool.QuestionTool()))
		n.NewSession("root")
		pid := n.Admit("root", "/task --background /task /ask which colour?")
		n.Idle()
		require.Equal(t, "succeeded", tr.PromptState(pid), "the root's turn ended at once")
		did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
		require.NoError(t, err)
		require.False(t, did, "the root is idle: nothing to interrupt")
		qs := questions(t, n, "root")
		require.Len(t, qs, 1, "the grandchild's question is still listed on the root")
		require.Equal(t, "root.2", qs[0].SessionID)
		return n, qs[0]
	}
	killEveryCommitAfterReply(t, killAfterReply{reply: reply, ask: ask, check: func(t *testing.T, tr *treetest.Tree) {
		assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr))
		endedOnce(t, tr, "root.2", 1)
		endedOnce(t, tr, "root.1", 1)
		endedOnce(t, tr, "root", 2) // its task turn and the notice's
		sets := settlements(t, tr.Events("root.1"))
		require.Len(t, sets, 1, "the child's call settled once")
		assert.Contains(t, sets[0].Output, `"which colour?" → "green"`)
		ps := prompts(tr, "root")
		assert.Len(t, ps, 2, "the task prompt and one notice: %v", ps)
		assert.Equal(t, "succeeded", ps[core.NoticeClientID("root.1", 1)], "%v", ps)
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
	}})
}
