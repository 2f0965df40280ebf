package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A prompt a client sends a child while its task turn runs is the child's
// own (docs/api.md): interrupting the parent ends the task turn, not that
// prompt, which runs next as a turn of the child's. With a kill right after
// the parent's interrupt commits (before the child was stopped), the sweep
// ends the orphaned task turn and runs the prompt just the same.
func TestInterruptingParentKeepsChildsOwnQueuedPrompt(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			tr := treetest.New(t)
			n := startSleepingChild(t, tr)
			task := runningPrompt(t, tr, "root.1")
			own := n.Admit("root.1", "my own prompt to the child")
			require.Equal(t, "queued", tr.PromptState(own))
			interruptRoot(t, tr, n, kill)

			want := "interrupted"
			if kill {
				want = "failed" // orphaned: aborted by the sweep
			}
			assert.Equal(t, want, tr.PromptState(task))
			assert.Equal(t, "succeeded", tr.PromptState(own), "the client's prompt ran")
			assert.Empty(t, treetest.OfType(tr.Events("root.1"), event.PromptCancelled))
			assert.Empty(t, treetest.OfType(tr.Events("root.1"), event.ExecutionResumed), "the task turn was not resumed")
			assert.Equal(t, map[string]string{"root.1": "ended"}, jobStates(tr))
			noClaims(t, tr)
			rebuildEquals(t, tr)
		})
	}
}

// The same for a child parked on its own question: the parent's interrupt
// ends the parked task turn in its own transaction and gives the child's
// queued prompt the claim, and that prompt runs.
func TestInterruptingParentKeepsParkedChildsOwnQueuedPrompt(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			tr := treetest.New(t)
			n, _ := askingChild(t, tr, offline.New(nil, offline.Options{}))
			task := runningPrompt(t, tr, "root.1")
			own := n.Admit("root.1", "my own prompt to the child")
			require.Equal(t, "queued", tr.PromptState(own), "it waits behind the parked turn")
			interruptRoot(t, tr, n, kill)

			assert.Equal(t, "interrupted", tr.PromptState(task))
			assert.Len(t, treetest.OfType(tr.Events("root.1"), event.QuestionCancelled), 1)
			assert.Equal(t, "succeeded", tr.PromptState(own), "the client's prompt ran")
			assert.Empty(t, treetest.OfType(tr.Events("root.1"), event.PromptCancelled))
			noClaims(t, tr)
			rebuildEquals(t, tr)
		})
	}
}

// interruptRoot interrupts "root" and waits until the tree is idle; with
// kill, the instance dies right after the interrupt commits and the next
// boot finishes the work. Its waits are bounded by a generous real-time
// limit, only to fail instead of hanging (an interrupt waiting for an
// execution that never says it is done).
func interruptRoot(t *testing.T, tr *treetest.Tree, n *treetest.Node, kill bool) {
	t.Helper()
	if kill {
		n.Kill.KillAt(1, true)
	}
	type result struct {
		did bool
		err error
	}
	ictx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // frees the interrupt if the test failed while it hung
	interrupted := make(chan result, 1)
	go func() {
		did, err := n.Inst.Interrupt(ictx, "root", event.ReasonUser)
		interrupted <- result{did, err}
	}()
	if kill {
		select {
		case <-n.Kill.Died():
		case <-time.After(30 * time.Second): // only to fail instead of hanging
			t.Fatal("the parent's interrupt never committed")
		}
		// The killed interrupt returns (with the kill's error) before the
		// node is crashed, as it would in a process that died.
		select {
		case <-interrupted:
		case <-time.After(30 * time.Second): // only to fail instead of hanging
			t.Fatal("the parent's interrupt never returned after its kill")
		}
		n.Crash()
		n = tr.Boot(taskRunner(t, tr, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), tool.QuestionTool()))
	} else {
		select {
		case r := <-interrupted:
			require.NoError(t, r.err)
			require.True(t, r.did)
		case <-time.After(30 * time.Second): // only to fail instead of hanging
			t.Fatal("the parent's interrupt never returned: it waits for a child's execution that never finished")
		}
	}
	n.Idle()
}

// runningPrompt is the session's running prompt.
func runningPrompt(t *testing.T, tr *treetest.Tree, sessionID string) string {
	t.Helper()
	var id string
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT id FROM prompts WHERE session_id = ? AND state = ?`, []any{sessionID, string(core.PromptRunning)}, &id)
		return err
	})
	require.NotEmpty(t, id, "%s has no running prompt", sessionID)
	return id
}
