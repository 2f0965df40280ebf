package core_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// excludedFromRebuild lists what the rebuild test does not compare, because
// no event describes it: whole bookkeeping tables (DESIGN §5: claim,
// attempts, epoch, wake-up) and the log itself, which is the source.
var excludedFromRebuild = map[string]string{
	"claims":            "claim, execution_id, resume_attempts, retry_at: bookkeeping written beside events",
	"tree":              "epoch: taken at boot",
	"schema_migrations": "migration bookkeeping",
	"events":            "the log is what projections are rebuilt from",
}

// 15. The projections rebuilt from the log equal the stored ones after a
// randomized history of sessions, prompts, interrupts, failures, progress,
// jobs, crashes and reboots.
func TestProjectionRebuildEqualsStoredAfterRandomHistory(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			tr := treetest.New(t)
			d := treetest.NewDriver(1024)
			n := tr.Boot(d)
			var sessions []string
			// No "stubborn" bodies here: interrupting one waits out the grace
			// period on the virtual clock (covered by the fence test).
			texts := []string{"hi", "hold", "fail", "progress"}
			for step := range 60 {
				switch op := rng.IntN(10); {
				case op == 0 || len(sessions) == 0:
					id := fmt.Sprintf("s%d", step)
					ns := core.NewSession{ID: id, Principal: "p"}
					if len(sessions) > 0 && rng.IntN(2) == 0 {
						ns.ParentID = sessions[rng.IntN(len(sessions))]
					}
					_, err := n.Inst.CreateSession(ctx, ns)
					require.NoError(t, err)
					sessions = append(sessions, id)
				case op <= 5:
					sid := sessions[rng.IntN(len(sessions))]
					in := core.PromptInput{Text: texts[rng.IntN(len(texts))]}
					if rng.IntN(3) == 0 {
						in.ClientID = fmt.Sprintf("c%d", rng.IntN(5))
					}
					if rng.IntN(5) == 0 {
						in.Mode = event.ModeReplace
					}
					_, err := n.Inst.Admit(ctx, sid, in)
					if err != nil {
						require.ErrorIs(t, err, core.ErrConflict)
					}
				case op == 6:
					_, err := n.Inst.Interrupt(ctx, sessions[rng.IntN(len(sessions))], event.ReasonUser)
					require.NoError(t, err)
				case op == 7:
					d.Release()
					n.Idle()
					d = treetest.NewDriver(1024)
					n.Crash()
					n = tr.Boot(d)
				default:
					n.Crash()
					n = tr.Boot(d)
				}
				drain(d)
			}
			d.Release()
			n.Idle()
			n.Crash()

			before := dumpProjections(t, tr)
			tr.Read(core.Rebuild)
			after := dumpProjections(t, tr)
			require.Equal(t, before, after)
			require.NotEmpty(t, before["prompts"])
		})
	}
}

func drain(d *treetest.Driver) {
	for {
		select {
		case <-d.Started:
		default:
			return
		}
	}
}

// dumpProjections reads every projection table whole, ordered, and checks
// that every other table is accounted for in excludedFromRebuild.
func dumpProjections(t *testing.T, tr *treetest.Tree) map[string][][]any {
	out := map[string][][]any{}
	tr.Read(func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
		require.NoError(t, err)
		projected := map[string]bool{}
		for _, p := range core.ProjectionTables {
			projected[p] = true
		}
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			_, excluded := excludedFromRebuild[name]
			require.True(t, projected[name] != excluded, "table %s must be a projection or listed as excluded", name)
		}
		for _, p := range core.ProjectionTables {
			r, err := tx.Query(`SELECT * FROM ` + p + ` ORDER BY 1`)
			require.NoError(t, err)
			out[p] = r.Values
		}
		return nil
	})
	return out
}
