package check_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The sub-agent fixture's root session; its children are p.1, p.2, ….
const taskRoot = "p"

// taskFixture writes a tree whose sub-agents go every way the task rules
// look at: a foreground child that echoes (p.1); a background child that
// calls a ledger tool, whose notice is admitted to the parent and runs
// (p.2); a foreground child that itself starts a foreground child (p.3,
// p.4); a foreground child killed inside its tool body and resumed by the
// sweep, its parent continuing from its end (p.5); a parent interrupted
// while its foreground child's body runs, which interrupts the child
// (p.6); and a background child whose parent is interrupted while the
// child's body runs, killed there and resumed after the interrupt
// answered (p.7). The ledger has every delivery.
func taskFixture(t *testing.T) (string, *check.Ledger) {
	t.Helper()
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	rc := &receivers{clock: tr.Clock, gseq: gseq, entered: make(chan string, 1), ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true}}}
	reg, err := tool.NewRegistry(append(rc.tools(), tool.Task())...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)

	n := tr.Boot(r)
	p := n.NewSession(taskRoot)
	n.Admit(p, "/task hello child\nfirst")
	n.Idle()
	n.Admit(p, "/task --background /tool ihook {\"n\":1}\nsecond")
	n.Idle()
	n.Admit(p, "/task /task nested words\nthird")
	n.Idle()

	// Killed in the child's body; the sweep resumes the child (its job is
	// live) and the parent continues from the child's end.
	rc.setBlocking(true)
	n.Admit(p, "/task /tool ihook {\"n\":2,\"block\":true}\nfourth")
	<-rc.entered
	n = rc.rebootUnblocked(tr, n, r)

	// The parent interrupted while its child's body runs.
	rc.setBlocking(true)
	n.Admit(p, "/task /tool hook {\"n\":3,\"block\":true}\nfifth")
	<-rc.entered
	sent := gseq()
	did, err := n.Inst.Interrupt(context.Background(), p, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	rc.mu.Lock()
	rc.ledger.Interrupts = append(rc.ledger.Interrupts, check.Interrupt{Session: p, At: tr.Clock.Now(), Sent: sent, Answered: gseq()})
	rc.mu.Unlock()
	n.Idle()
	rc.setBlocking(false)
	n.Crash()
	n = tr.Boot(r)
	n.Idle()

	// A background child at work when its parent is interrupted goes on:
	// the interrupt stops foreground descendants only. Killed in its body
	// after the interrupt answered, it is resumed by the sweep and ends.
	rc.setBlocking(true)
	n.Admit(p, "/task --background /tool ihook {\"n\":4,\"block\":true}\nsixth")
	<-rc.entered
	sent = gseq()
	_, err = n.Inst.Interrupt(context.Background(), p, event.ReasonUser)
	require.NoError(t, err)
	rc.mu.Lock()
	rc.ledger.Interrupts = append(rc.ledger.Interrupts, check.Interrupt{Session: p, At: tr.Clock.Now(), Sent: sent, Answered: gseq()})
	rc.mu.Unlock()
	n = rc.rebootUnblocked(tr, n, r)

	// A child with a background child of its own: the child's task turn
	// (and job) ends at once, and the grandchild's notice later runs a
	// turn of the child's own, not a second task turn.
	n.Admit(p, "/task /task --background /tool ihook {\"n\":5}\nseventh")
	n.Idle()
	n.Crash()

	path, l := written(t, tr, rc)
	return path, l
}
