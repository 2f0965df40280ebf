package check_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// A prompt a client sent to a child is the child's own (RuleChildOwnPrompt):
// it may end succeeded, or interrupted or cancelled by an interrupt sent
// to the child itself, but never orphaned, cancelled with its task turn,
// or aborted by the sweep as an orphan.
func TestChildOwnPromptEnds(t *testing.T) {
	path, clean := taskFixture(t)
	own := func(end ...string) []string {
		return append([]string{appendEvent("p.1", event.PromptAdmitted, `json_object('prompt_id', 'own', 'client_id', 'c1', 'text', 'mine', 'mode', 'queue')`)}, end...)
	}
	started := []string{
		appendEvent("p.1", event.ExecutionStarted, `json_object('execution_id', 'x9', 'prompt_id', 'own', 'cause', 'prompt', 'turn_start', json('true'))`),
	}
	childInterrupt := []check.Interrupt{{Session: "p.1", Sent: 1}}
	// Answered at commit position 2, long before the prompt's admission
	// (the fixture's log is longer): it cannot have ended the prompt.
	earlierChildInterrupt := []check.Interrupt{{Session: "p.1", Sent: 1, Answered: 2}}
	rootInterrupt := []check.Interrupt{{Session: "p", Sent: 1}}
	cases := []struct {
		name       string
		sql        []string
		interrupts []check.Interrupt
		bad        string // "" for a clean history
	}{
		{name: "it succeeds", sql: own(append(started,
			appendEvent("p.1", event.ExecutionSucceeded, `json_object('execution_id', 'x9', 'prompt_id', 'own')`))...)},
		{name: "the child's interrupt cancels it", interrupts: childInterrupt,
			sql: own(appendEvent("p.1", event.PromptCancelled, `json_object('prompt_id', 'own', 'reason', 'user')`))},
		{name: "the child's interrupt ends its turn", interrupts: childInterrupt, sql: own(append(started,
			appendEvent("p.1", event.ExecutionInterrupted, `json_object('execution_id', 'x9', 'prompt_id', 'own', 'reason', 'user')`))...)},
		{name: "the child's interrupt was answered before the prompt came", interrupts: earlierChildInterrupt, bad: "ends cancelled:user",
			sql: own(appendEvent("p.1", event.PromptCancelled, `json_object('prompt_id', 'own', 'reason', 'user')`))},
		{name: "only the parent was interrupted", interrupts: rootInterrupt, bad: "ends cancelled:user",
			sql: own(appendEvent("p.1", event.PromptCancelled, `json_object('prompt_id', 'own', 'reason', 'user')`))},
		{name: "the task turn's end cancels it", bad: "ends cancelled:orphaned",
			sql: own(appendEvent("p.1", event.PromptCancelled, `json_object('prompt_id', 'own', 'reason', 'orphaned')`))},
		{name: "the parent's interrupt ends its turn", interrupts: rootInterrupt, bad: "ends interrupted:user", sql: own(append(started,
			appendEvent("p.1", event.ExecutionInterrupted, `json_object('execution_id', 'x9', 'prompt_id', 'own', 'reason', 'user')`))...)},
		{name: "the sweep aborts it as an orphan", bad: "without a count past the budget", sql: own(append(started,
			appendEvent("p.1", event.ExecutionFailed, `json_object('execution_id', 'x9', 'prompt_id', 'own', 'type', 'aborted', 'message', '`+strings.ReplaceAll(core.OrphanMessage, "'", "''")+`')`))...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := copyTree(t, path)
			tamper(t, p, c.sql...)
			l := *clean
			l.InterruptsSent = c.interrupts
			res, err := check.Tree(p, &l, check.Options{Label: "seed 7 tree 5"})
			require.NoError(t, err)
			// The tampering writes the log alone: the projections differ.
			var own, all []string
			for _, v := range res.Violations {
				if v.Rule == check.RuleProjections {
					continue
				}
				all = append(all, v.String())
				if v.Rule == check.RuleChildOwnPrompt {
					own = append(own, v.Detail)
				}
			}
			assert.Equal(t, 1, res.ChildPrompts)
			if c.bad == "" {
				assert.Empty(t, all)
				return
			}
			require.Len(t, own, 1, "got:\n%s", strings.Join(all, "\n"))
			assert.Contains(t, own[0], c.bad)
		})
	}
}
