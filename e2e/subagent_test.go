package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Event types of sub-agents' jobs, in the parent's log.
const (
	typeJobStarted = "session.job.started@1"
	typeJobEnded   = "session.job.ended@1"
)

// TestSubagentAcrossSIGKILL kills the local server, in each mode, while a
// foreground sub-agent works for its parent's turn, restarts it over the
// same data directory and sends no request but reads: the child's turn is
// resumed from what it recorded and ends once, its answer reaches the
// parent's waiting call once, and the parent's turn ends once. A parent
// the user interrupted before the kill stays interrupted, and so does its
// child: neither starts again.
func TestSubagentAcrossSIGKILL(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		t.Run("KilledWhileTheChildStreams", subagentKilledMidChild)
		t.Run("InterruptedThenKilled", subagentInterruptedThenKilled)
		t.Run("InterruptStopsAGrandchild", subagentInterruptStopsGrandchild)
	})
}

// childWords is the child's prompt: its echo streams for about three
// seconds at the e2e word delay, so a kill lands inside it.
func childWords() string {
	words := make([]string, 150)
	for i := range words {
		words[i] = fmt.Sprintf("w%03d", i)
	}
	return strings.Join(words, " ")
}

// untilChildRuns follows the parent until its job started, then the child
// until pred holds, and returns what the child's stream saw.
func untilChildRuns(s *server, sid, what string, pred func(ev) bool) []ev {
	st := s.follow(sid, 0)
	st.until("the parent's job to start", isType(typeJobStarted))
	st.close()
	cst := s.follow(sid+".1", 0)
	defer cst.close()
	cst.until(what, pred)
	return cst.log
}

// taskPrompt is the id of the child's task prompt (client id task-…).
func taskPrompt(sum summary) string {
	for _, pid := range sum.order {
		if a := sum.log[sum.turns[pid].admitted]; strings.HasPrefix(a.P.ClientID, "task-") {
			return pid
		}
	}
	return ""
}

func subagentKilledMidChild(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	child := sid + ".1"
	words := childWords()
	a := s.prompt(sid, "/task "+words)
	seen := untilChildRuns(s, sid, "the child's answer to stream", nDeltas(60))
	checkpointed := ""
	for _, e := range seen {
		if e.Type == typeCheckpoint {
			checkpointed += e.P.Text
		}
	}
	t.Logf("the child's checkpoints kept %d bytes before the kill", len(checkpointed))
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typeJobStarted], "one child started; log:%s", describe(sum.log))
	assert.Equal(t, 1, sum.byType[typeJobEnded], "its job ended once")
	taskCalls := 0
	for _, e := range sum.log {
		if e.Type == typeToolSettled {
			taskCalls++
		}
	}
	assert.Equal(t, 1, taskCalls, "the task call is settled once")
	require.NotEmpty(t, ta.done)
	final := ta.done[len(ta.done)-1].P.Text
	assert.Contains(t, final, "w149", "the child's whole answer is the task's result: %q", final)

	csum := s.settle(child)
	task := taskPrompt(csum)
	require.NotEmpty(t, task, "the child's task prompt; log:%s", describe(csum.log))
	tc := csum.requireEnd(t, task, typeSucceeded, "")
	assert.Len(t, tc.resumes, 1, "the child's turn resumed once after the kill; log:%s", describe(csum.log))
	if checkpointed != "" {
		var cut string
		for _, e := range csum.log {
			if e.Type == typeStepCut {
				cut = e.P.Text
			}
		}
		assert.True(t, strings.HasPrefix(cut, checkpointed), "the cut step keeps what its checkpoints saved: cut %q, checkpoints %q", cut, checkpointed)
	}
}

func subagentInterruptedThenKilled(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	child := sid + ".1"
	a := s.prompt(sid, "/task /sleep 1h\nWait for the child.")
	untilChildRuns(s, sid, "the child's turn to start", isType(typeStarted))
	require.True(t, s.interrupt(sid), "the parent's turn is interrupted")
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	sum.requireEnd(t, a, typeInterrupted, "user")
	assert.Equal(t, 1, sum.byType[typeJobEnded], "the child's job ended with the turn")

	csum := s.settle(child)
	task := taskPrompt(csum)
	require.NotEmpty(t, task, "the child's task prompt; log:%s", describe(csum.log))
	tc := csum.requireEnd(t, task, typeInterrupted, "user")
	assert.Len(t, tc.starts, 1, "the interrupted child never started again; log:%s", describe(csum.log))
	assert.Empty(t, tc.resumes, "nor was it resumed")
}

// subagentInterruptStopsGrandchild: the root waits on a child that waits
// on a grandchild streaming its answer; the root's interrupt stops the
// grandchild before it answers 200, and after a kill and a restart
// nothing of the grandchild's task turn happens after its end.
func subagentInterruptStopsGrandchild(t *testing.T) {
	s := start(t, t.TempDir())
	g := interruptOverGrandchild(t, s)
	s.kill()
	g.requireStoppedForGood(t, s.restart())
}

// grandchildInterrupt is a root's turn interrupted while a grandchild
// streamed for a child parked on it.
type grandchildInterrupt struct {
	root, prompt, grandchild string
	answered                 snap // the grandchild's snapshot right after the 200
}

// interruptOverGrandchild starts a root's turn whose child's own task
// call runs a grandchild, waits until the grandchild streams, interrupts
// the root and checks the grandchild's claim is gone by the answer.
func interruptOverGrandchild(t *testing.T, s *server) grandchildInterrupt {
	t.Helper()
	sid := s.create()
	g := grandchildInterrupt{root: sid, grandchild: sid + ".2"}
	g.prompt = s.prompt(sid, "/task /task "+childWords())
	untilChildRuns(s, sid, "the child's own job to start", isType(typeJobStarted))
	gst := s.follow(g.grandchild, 0)
	gst.until("the grandchild's answer to stream", nDeltas(5))
	gst.close()
	require.True(t, s.interrupt(sid), "the root's turn is interrupted")
	g.answered = s.snapshot(g.grandchild)
	require.Nil(t, g.answered.Claim, "the grandchild's turn ended before the interrupt answered")
	return g
}

// requireStoppedForGood checks, on a server restarted after a kill, that
// the root's turn and the grandchild's task turn ended interrupted{user},
// the grandchild's by the interrupt's answer, and that it never started
// again.
func (g grandchildInterrupt) requireStoppedForGood(t *testing.T, s *server) {
	t.Helper()
	s.settle(g.root, g.prompt).requireEnd(t, g.prompt, typeInterrupted, "user")
	gsum := s.settle(g.grandchild)
	task := taskPrompt(gsum)
	require.NotEmpty(t, task, "the grandchild's task prompt; log:%s", describe(gsum.log))
	gt := gsum.requireEnd(t, task, typeInterrupted, "user")
	require.Less(t, gt.end.Seq, g.answered.Cursor+1, "ended by the time the interrupt answered; log:%s", describe(gsum.log))
	require.Empty(t, gt.resumes, "never resumed")
	require.Len(t, gt.starts, 1, "never started again")
}
