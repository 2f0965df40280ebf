package check_test

import (
	"encoding/json"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// streamedStep is a step of a tree file recorded complete with text, with
// its place in the commit order.
type streamedStep struct {
	session, step string
	gseq          int64
}

// streamed is every step of a tree file recorded complete with text, and
// the tree's commit position.
func streamed(t *testing.T, path string) ([]streamedStep, int64) {
	t.Helper()
	var out []streamedStep
	eachRow(t, path, `SELECT session_id, data, gseq FROM events WHERE type = ? ORDER BY gseq`, func(st *sqlite3.Stmt) {
		var p event.StepDone
		require.NoError(t, json.Unmarshal([]byte(st.ColumnText(1)), &p))
		if p.Text != "" {
			out = append(out, streamedStep{st.ColumnText(0), p.StepID, st.ColumnInt64(2)})
		}
	}, string(event.StepCompleted))
	require.GreaterOrEqual(t, len(out), 2, "the fixture streams text in several steps")
	return out, queryInt(t, path, `SELECT MAX(gseq) FROM events`)
}

// deltaEmits is the fixture's log committed by boot 1, quiet at quiet,
// with one delta emitted for each of steps.
func deltaEmits(top, quiet int64, steps []streamedStep) *check.Emits {
	e := &check.Emits{From: map[int]int64{1: 0}, Settled: map[int]int64{1: quiet},
		Commits: []check.Commit{{Boot: 1, From: 0, To: top}}}
	for _, s := range steps {
		e.Deltas = append(e.Deltas, check.Delta{Boot: 1, Session: s.session, Step: s.step})
	}
	return e
}

func deltaViolations(t *testing.T, path string, l check.Ledger, e *check.Emits) []string {
	t.Helper()
	l.Emits = e
	return violationsOf(t, path, &l, check.RuleDeltas)
}

// Every step that streamed text had a delta of its emitted by the instance
// that completed it, once that instance went quiet; an instance killed
// before it went quiet after a completion owes nothing for it.
func TestDeltasThatReachEmit(t *testing.T) {
	path, clean := fixture(t)
	steps, top := streamed(t, path)
	assert.Empty(t, deltaViolations(t, path, *clean, deltaEmits(top, top, steps)))
	assert.Empty(t, deltaViolations(t, path, *clean, deltaEmits(top, steps[len(steps)-1].gseq-1, steps[:len(steps)-1])),
		"killed before it went quiet after the last completion")
	assert.Empty(t, deltaViolations(t, path, *clean, &check.Emits{From: map[int]int64{1: 0}}), "no record, no check")
}

// A step whose deltas never reached emit from its instance is caught: none
// emitted, or only by another instance, or under another session.
func TestLostDeltasAreCaught(t *testing.T) {
	path, clean := fixture(t)
	steps, top := streamed(t, path)
	none := deltaEmits(top, top, steps[1:])
	other := deltaEmits(top, top, steps)
	other.Deltas[0].Boot = 2
	elsewhere := deltaEmits(top, top, steps)
	elsewhere.Deltas[0].Session = "elsewhere"
	for name, e := range map[string]*check.Emits{"none": none, "another boot's": other, "another session's": elsewhere} {
		vs := deltaViolations(t, path, *clean, e)
		if assert.Len(t, vs, 1, name) {
			assert.Contains(t, vs[0], "step "+steps[0].step+" streamed", name)
		}
	}
}
