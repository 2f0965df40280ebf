package core_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/storage"
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
		tr.Read(func(tx storage.Tx) error {
			plan = plan[:0]
			rows, err := tx.Query(`EXPLAIN QUERY PLAN `+query, sid, int64(1)<<62, 0, string(core.StepStreaming))
			if err != nil {
				return err
			}
			for rows.Next() {
				var id, parent, unused int64
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return nil
		})
		require.NotEmpty(t, plan, name)
		for _, line := range plan {
			if eventsAccess.MatchString(line) {
				assert.Contains(t, line, "seq=?", "%s reads events other than by key: %q in plan %q", name, line, plan)
			}
		}
	}
}
