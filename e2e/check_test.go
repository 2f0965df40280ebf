package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// turn is what a session's log says about one admitted prompt.
type turn struct {
	id       string
	admitted int  // index of its admission in the log
	end      *ev  // its terminal or cancellation
	endAt    int  // index of end in the log
	starts   []ev // execution.started
	resumes  []ev // execution.resumed
	stops    []ev // interrupted{shutdown}
	steps    []ev // step.started
	done     []ev // step.completed
}

// summary is a checked log.
type summary struct {
	log    []ev
	turns  map[string]*turn
	order  []string // prompt ids in admission order
	ends   int      // turn terminals (cancellations excluded)
	byType map[string]int
}

func (sum summary) turn(t *testing.T, promptID string) *turn {
	t.Helper()
	tr := sum.turns[promptID]
	require.NotNil(t, tr, "prompt %s was never admitted; log:%s", promptID, describe(sum.log))
	return tr
}

// requireEnd checks the prompt's one end has the type (and reason for
// interrupts and cancellations, failure type for failures).
func (sum summary) requireEnd(t *testing.T, promptID, typ, reason string) *turn {
	t.Helper()
	tr := sum.turn(t, promptID)
	require.NotNil(t, tr.end, "prompt %s has no end; log:%s", promptID, describe(sum.log))
	require.Equal(t, typ, tr.end.Type, "end of prompt %s; log:%s", promptID, describe(sum.log))
	switch typ {
	case typeInterrupted, typeCancelled:
		require.Equal(t, reason, tr.end.P.Reason, "reason of the end of prompt %s", promptID)
	case typeFailed:
		require.Equal(t, reason, tr.end.P.Kind, "failure type of prompt %s", promptID)
	}
	return tr
}

// checkLog checks the invariants every session's log must keep, whatever
// was killed when, and fails the test with every violation found.
func checkLog(t *testing.T, log []ev, accepted []string) summary {
	t.Helper()
	sum, bad := audit(log, accepted)
	if len(bad) > 0 {
		t.Fatalf("the log breaks the promise:\n  %s\nlog:%s", strings.Join(bad, "\n  "), describe(log))
	}
	return sum
}

// audit reads a session's durable log and lists what breaks these rules:
//   - seqs are contiguous from 1 and the first event is session.created;
//   - every prompt answered 202 (accepted) was admitted, exactly once;
//   - every admitted prompt ends exactly once: one terminal (succeeded,
//     failed, interrupted for a reason other than shutdown) or one
//     cancellation, never both, never two terminals;
//   - nothing of a prompt's turn happens after its end: no event naming the
//     prompt, its executions, its steps or their tool calls (so no
//     execution.started and no execution.resumed after an interrupt), but
//     a sub-agent's job.ended, which its child's end records;
//   - a cancelled prompt never started; every other prompt started its turn
//     exactly once, in admission order, and turns never overlap;
//   - a resumed execution is counted (execution.resumed) before it starts,
//     and a turn stopped for shutdown succeeds only after a resume.
func audit(log []ev, accepted []string) (summary, []string) {
	sum := summary{log: log, turns: map[string]*turn{}, byType: map[string]int{}}
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if len(log) == 0 {
		return sum, []string{"the log is empty"}
	}
	for i, e := range log {
		if e.Seq != int64(i+1) {
			fail("event %d of the log has seq %d: seqs must be contiguous from 1", i+1, e.Seq)
		}
		sum.byType[e.Type]++
	}
	if log[0].Type != typeCreated {
		fail("the first event is %s, not %s", log[0].Type, typeCreated)
	}

	stepPrompt := map[string]string{} // step id → prompt id
	callPrompt := map[string]string{} // tool call id → prompt id
	execPrompt := map[string]string{} // execution id → prompt id
	owner := func(e ev) string {
		switch {
		case e.Type == typeJobEnded:
			// The child's end records it, in the child's transaction: after
			// an interrupt of the parent it follows the parent's end, since
			// the running child is stopped once that end committed
			// (docs/api.md, Sub-agents). It is the child's act, not the turn's.
			return ""
		case e.P.PromptID != "":
			return e.P.PromptID
		case e.P.StepID != "":
			return stepPrompt[e.P.StepID]
		case e.P.CallID != "":
			return callPrompt[e.P.CallID]
		case e.P.ExecutionID != "":
			return execPrompt[e.P.ExecutionID]
		}
		return ""
	}
	var running string // prompt whose turn is open
	var turnStarts []string
	for i, e := range log {
		if e.Type == typeAdmitted {
			if sum.turns[e.P.PromptID] != nil {
				fail("#%d: prompt %s admitted twice", e.Seq, e.P.PromptID)
				continue
			}
			sum.turns[e.P.PromptID] = &turn{id: e.P.PromptID, admitted: i}
			sum.order = append(sum.order, e.P.PromptID)
			continue
		}
		switch e.Type {
		case typeStepStarted:
			stepPrompt[e.P.StepID] = e.P.PromptID
		case typeStarted:
			execPrompt[e.P.ExecutionID] = e.P.PromptID
		}
		pid := owner(e)
		if pid == "" {
			continue
		}
		tr := sum.turns[pid]
		if tr == nil {
			fail("#%d %s names prompt %s, never admitted", e.Seq, e.Type, pid)
			continue
		}
		if tr.end != nil {
			fail("#%d %s of prompt %s comes after its end #%d %s", e.Seq, e.Type, pid, tr.end.Seq, tr.end.Type)
			continue
		}
		switch e.Type {
		case typeStarted:
			if e.P.TurnStart {
				if running != "" {
					fail("#%d: the turn of %s starts while the turn of %s is open", e.Seq, pid, running)
				}
				if len(tr.starts) > 0 {
					fail("#%d: the turn of %s starts twice", e.Seq, pid)
				}
				running = pid
				turnStarts = append(turnStarts, pid)
			} else if running != pid {
				fail("#%d: an execution of %s continues a turn that is not open", e.Seq, pid)
			}
			if e.P.Cause == "resume" && (len(tr.resumes) == 0 || len(tr.starts) > 0 && tr.resumes[len(tr.resumes)-1].Seq < tr.starts[len(tr.starts)-1].Seq) {
				fail("#%d: a resumed execution of %s starts without its own execution.resumed", e.Seq, pid)
			}
			tr.starts = append(tr.starts, e)
		case typeResumed:
			if running != pid {
				fail("#%d: a resume of %s, whose turn is not open", e.Seq, pid)
			}
			if e.P.Attempt < 1 {
				fail("#%d: resume attempt %d", e.Seq, e.P.Attempt)
			}
			tr.resumes = append(tr.resumes, e)
		case typeStepStarted:
			tr.steps = append(tr.steps, e)
		case typeStepDone:
			tr.done = append(tr.done, e)
			for _, c := range e.P.ToolCalls {
				callPrompt[c.CallID] = pid
			}
		case typeInterrupted, typeSucceeded, typeFailed, typeCancelled:
			if e.Type == typeInterrupted && !e.terminal() {
				tr.stops = append(tr.stops, e)
				continue
			}
			end := e
			tr.end, tr.endAt = &end, i
			if e.Type == typeCancelled {
				if len(tr.starts) > 0 {
					fail("#%d: prompt %s cancelled after its turn started", e.Seq, pid)
				}
				continue
			}
			sum.ends++
			if running != pid {
				fail("#%d: a terminal of %s, whose turn is not open", e.Seq, pid)
			}
			running = ""
		}
	}
	for _, pid := range accepted {
		if sum.turns[pid] == nil {
			fail("prompt %s was answered 202 but is not in the log: lost", pid)
		}
	}
	var fifo []string
	for _, pid := range sum.order {
		tr := sum.turns[pid]
		if tr.end == nil {
			fail("prompt %s never ended", pid)
			continue
		}
		if tr.end.Type != typeCancelled {
			fifo = append(fifo, pid)
			if len(tr.starts) == 0 {
				fail("prompt %s ended %s without its turn starting", pid, tr.end.Type)
			}
		}
		if n := len(tr.stops); n > 0 && tr.end.Type == typeSucceeded &&
			(len(tr.resumes) == 0 || tr.resumes[len(tr.resumes)-1].Seq < tr.stops[n-1].Seq) {
			fail("prompt %s stopped for shutdown and succeeded without a resume", pid)
		}
	}
	if fmt.Sprint(fifo) != fmt.Sprint(turnStarts) {
		fail("turns must start once each in admission order: admitted %v, started %v", fifo, turnStarts)
	}
	return sum, bad
}

// probeText is the prompt settle sends last.
const probeText = "probe after the restart"

// settle is the check after a restart: it follows the session's events
// from 0 until every admitted prompt has ended (and fails at once if a
// prompt answered 202 is missing), then sends a probe prompt and waits for
// it to succeed, so whatever a revived turn would have written is in the
// log before the probe's terminal. It then checks the snapshot is idle,
// re-reads the whole log from seq 0 on a fresh stream (it must be the same
// events), checks the log's invariants and returns the summary.
func (s *server) settle(sid string, accepted ...string) summary {
	t := s.t
	t.Helper()
	cursor := s.snapshot(sid).Cursor
	st := s.follow(sid, 0)
	defer st.close()
	admitted, ended := map[string]bool{}, map[string]bool{}
	track := func(e ev) {
		switch {
		case e.Type == typeAdmitted:
			admitted[e.P.PromptID] = true
		case e.terminal() || e.Type == typeCancelled:
			ended[e.P.PromptID] = true
		}
	}
	for st.last < cursor {
		track(st.until("the log up to the snapshot's cursor", func(e ev) bool { return e.Seq > 0 }))
	}
	for _, pid := range accepted {
		require.True(t, admitted[pid], "prompt %s was answered 202 before the kill but is not in the log (lost); log:%s", pid, describe(st.log))
	}
	allEnded := func() bool {
		for pid := range admitted {
			if !ended[pid] {
				return false
			}
		}
		return true
	}
	for !allEnded() {
		track(st.until("every admitted prompt to end", func(e ev) bool { return e.Seq > 0 }))
	}

	probe := s.prompt(sid, probeText)
	end := st.until("the probe's end", endOf(probe))
	require.Equal(t, typeSucceeded, end.Type, "the probe prompt; log:%s", describe(st.log))

	sn := s.snapshot(sid)
	assert.Equal(t, "idle", sn.Status)
	assert.Nil(t, sn.Claim, "no claim at quiescence")
	assert.Empty(t, sn.Prompts, "no prompt queued or running at quiescence")
	require.Equal(t, st.last, sn.Cursor, "nothing is written after the probe's terminal; followed:%s", describe(st.log))

	log := s.readLog(sid, sn.Cursor)
	require.Equal(t, len(st.log), len(log))
	for i := range log {
		require.Equal(t, st.log[i].ID, log[i].ID, "a fresh read from 0 gives the same events, seq %d", i+1)
	}
	sum := checkLog(t, log, append(accepted, probe))
	assert.Equal(t, sum.ends, sn.Turns, "snapshot turns counts every ended turn")
	return sum
}
