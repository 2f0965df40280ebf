package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// BenchmarkPlanTranscriptOfALongSession is what planTranscript reads and
// decides before every model request of a session, on one whose
// transcript holds n messages of 2 KB (a third each user, assistant and
// tool), with a budget that sends the newest 100 KB, read on a
// connection kept open as the instance's is. before is the plan as it
// was (planEveryUnit: a row of every message the session has had, its
// cost growing with the session's history); after is planTranscript,
// which reads newest first until past the budget and counts the rest from
// the indexes.
func BenchmarkPlanTranscriptOfALongSession(b *testing.B) {
	const budget = 100 << 10
	for _, n := range []int{2_000, 20_000} {
		tr := treetest.New(b)
		node := tr.Boot(treetest.NewDriver(1))
		id := node.NewSession("s")
		text := strings.Repeat("x", 2<<10)
		roles := []string{"user", "assistant", "tool"}
		tr.Read(func(tx storage.Tx) error {
			for i := range n {
				if _, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at) VALUES (?, ?, ?, ?, ?, ?, 0)`,
					fmt.Sprintf("msg-%d", i), id, 1_000_000+i, fmt.Sprintf("prompt-%d", i/3), roles[i%3], text); err != nil {
					return err
				}
			}
			return nil
		})
		_, db, _ := tr.Host()
		// The newest 100 KB are 50 units of 2 KB, prompts and answers, 25
		// exchanges: with the notice, the request sends 24 of them.
		wantOmitted := n - n/3 - 48
		for _, plan := range []struct {
			name string
			plan func(storage.Tx, string, int) (int64, int, error)
		}{{"before", planEveryUnit}, {"after", planTranscript}} {
			b.Run(fmt.Sprintf("messages=%d/%s", n, plan.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var omitted int
					if err := db.Tx(context.Background(), func(tx storage.Tx) (err error) {
						_, omitted, err = plan.plan(tx, id, budget)
						return err
					}); err != nil {
						b.Fatal(err)
					}
					if omitted != wantOmitted {
						b.Fatalf("left out %d messages, want %d", omitted, wantOmitted)
					}
				}
			})
		}
	}
}
