package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A replace prompt ends the running turn and cancels every queued prompt
// with reason superseded, not user (docs/api.md, mode replace): a client
// tells its own interrupt from a replacement by it. The user's interrupt
// gives user to both.
func TestReplaceCancelsTheQueueAsSuperseded(t *testing.T) {
	for _, reason := range []string{event.ReasonSuperseded, event.ReasonUser} {
		t.Run(reason, func(t *testing.T) {
			tr := treetest.New(t)
			d := treetest.NewDriver(4)
			n := tr.Boot(d)
			sid := n.NewSession("s")
			running := n.Admit(sid, "hold")
			<-d.Started
			queued := n.Admit(sid, "next")
			if reason == event.ReasonSuperseded {
				_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "instead", Mode: event.ModeReplace})
				require.NoError(t, err)
			} else {
				did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
				require.NoError(t, err)
				require.True(t, did)
			}
			n.Idle()

			assert.Equal(t, "interrupted", tr.PromptState(running))
			assert.Equal(t, "cancelled", tr.PromptState(queued))
			evs := tr.Events(sid)
			ints := treetest.OfType(evs, event.ExecutionInterrupted)
			require.Len(t, ints, 1)
			var in event.Interrupted
			require.NoError(t, ints[0].Decode(&in))
			assert.Equal(t, reason, in.Reason)
			assert.Equal(t, event.Cancelled{PromptID: queued, Reason: reason}, onlyCancel(t, evs))
			turns := 1 // the interrupted turn; a cancelled prompt never ran one
			if reason == event.ReasonSuperseded {
				turns = 2 // and the replacing prompt's
			}
			assert.Equal(t, turns, sessionRow(t, tr, sid).Turns)
		})
	}
}
