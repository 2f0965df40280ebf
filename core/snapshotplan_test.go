package core_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// eventsAccess is a query plan line that reads the events table (alias e).
var eventsAccess = regexp.MustCompile(`\b(SEARCH|SCAN) e\b`)

// A snapshot's page of messages finds the time of a streaming step's
// started event by that event's key. Joined instead, SQLite ranged over
// every event of the session in the page's range and scanned the steps
// for each: a snapshot of a session with 22,000 events (a long queue)
// took minutes, with the tree's only connection held all along, so every
// other request of the tree and its running turn waited. The plan, not a
// timing, is what this test checks.
func TestSnapshotTranscriptLooksUpEventsByKey(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	sid := n.NewSession("s")
	for name, query := range core.TranscriptQueries {
		var plan []string
		for _, l := range tr.QueryPlan(query, sid, int64(1)<<62, 0, string(core.StepStreaming), 50) {
			plan = append(plan, l.Detail)
		}
		require.NotEmpty(t, plan, name)
		for _, line := range plan {
			if eventsAccess.MatchString(line) {
				assert.Contains(t, line, "seq=?", "%s reads events other than by key: %q in plan %q", name, line, plan)
			}
		}
	}
}

// messagesAccess is a plan line that reads the messages table by the
// session's index.
var messagesAccess = regexp.MustCompile(`^SEARCH messages USING INDEX messages_by_session \(session_id=\? AND seq>\? AND seq<\?\)$`)

// A snapshot's page of messages reads the session's newest messages
// only, whatever the length of its transcript: the messages side of the
// page's queries walks the index from the newest message down and sorts
// only the ties on seq (by id) itself, so that its LIMIT stops the walk.
// Ordered and limited only once joined with the streaming steps, every
// message of the session was read and sorted, each snapshot (20,000
// messages: 700 ms, BenchmarkSnapshotOfALongTranscript). The plan, not a
// timing, is what this test checks.
func TestSnapshotPageReadsTheNewestMessagesOnly(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	sid := n.NewSession("s")
	for _, name := range []string{"page", "pageSizes"} {
		plan := tr.QueryPlan(core.TranscriptQueries[name], sid, int64(1)<<62, 0, string(core.StepStreaming), 50)
		var access *treetest.PlanLine
		for i := range plan {
			if messagesAccess.MatchString(plan[i].Detail) {
				access = &plan[i]
			}
		}
		require.NotNil(t, access, "%s reads no messages by the session's index: %v", name, plan)
		sortsTies := false
		for _, l := range plan {
			if l.Parent == access.Parent && l.Detail == "USE TEMP B-TREE FOR LAST TERM OF ORDER BY" {
				sortsTies = true
			}
		}
		assert.True(t, sortsTies, "%s: the messages are not ordered and limited where they are read: %v", name, plan)
	}
}

// stepsAccess is a plan line that reads the steps table (alias s) by the
// session's index of steps (migration 0010).
var stepsAccess = regexp.MustCompile(`^SEARCH s USING INDEX steps_by_session \(session_id=\? AND state=\? AND started_seq>\? AND started_seq<\?\)$`)

// A snapshot's page finds the session's steps still streaming by the
// session's index of steps, not by reading every step the tree has had,
// each with its whole answer (20,000 steps of 2 KB: 110 ms a snapshot
// without the index, BenchmarkSnapshotOfALongSession). The benchmark
// alone would not tell if the index were dropped or the query changed
// so that it no longer applies; the plan does.
func TestSnapshotPageFindsStreamingStepsByTheSessionsIndex(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	sid := n.NewSession("s")
	for _, name := range []string{"page", "pageSizes"} {
		plan := tr.QueryPlan(core.TranscriptQueries[name], sid, int64(1)<<62, 0, string(core.StepStreaming), 50)
		found := false
		for _, l := range plan {
			found = found || stepsAccess.MatchString(l.Detail)
		}
		assert.True(t, found, "%s does not read the steps by the session's index: %v", name, plan)
	}
}
