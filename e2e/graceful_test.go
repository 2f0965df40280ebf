package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGracefulStop: SIGTERM while a turn sleeps in the model, with a prompt
// queued behind it. The server exits cleanly after recording
// interrupted{shutdown}, which keeps the claim; the restart resumes the
// turn (execution.resumed, then a start with cause resume) and it succeeds
// once, then the queued prompt runs once, without a resume.
func TestGracefulStop(t *testing.T) { eachMode(t, testGracefulStop) }

func testGracefulStop(t *testing.T) {
	s, sid, a, _ := sleepingTurn(t, "/sleep 500ms\nstopped gracefully")
	b := s.prompt(sid, "queued during the stop")
	s.stop()
	assert.Contains(t, s.logs.String(), "shutting down")

	s = s.restart()
	sum := s.settle(sid, a, b)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.stops, 1, "one interrupted{shutdown}")
	require.Len(t, ta.resumes, 1)
	require.Len(t, ta.starts, 2)
	stop, resume, restart := ta.stops[0], ta.resumes[0], ta.starts[1]
	assert.Equal(t, 1, resume.P.Attempt)
	assert.Equal(t, "resume", restart.P.Cause)
	assert.Less(t, stop.Seq, resume.Seq, "the shutdown stop comes before the resume")
	assert.Less(t, resume.Seq, restart.Seq, "the resume is counted before the execution starts")
	assert.Less(t, restart.Seq, ta.end.Seq)
	assert.Equal(t, "You said: stopped gracefully", ta.done[len(ta.done)-1].P.Text)
	tb := sum.requireEnd(t, b, typeSucceeded, "")
	assert.Empty(t, tb.resumes)
	assert.Empty(t, tb.stops)
}
