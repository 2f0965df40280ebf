package check_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/sim/check"
)

// Children's questions and permission requests are judged as the root's,
// and a parent waiting on a child that waits for an answer is visibly
// waiting, not a prompt that never ended: the child-question fixture is
// clean.
func TestCleanChildQuestionHistoryHasNoViolations(t *testing.T) {
	path, ledger, _ := childQuestionFixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "child questions"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all, strings.Join(all, "\n"))
	assert.Equal(t, 6, res.Sessions, "the root and five children")
	assert.Equal(t, 4, res.Questions, "three questions and one permission request: the always rule covers the second call")
	assert.Equal(t, 2, res.Answered)
	assert.Equal(t, 5, res.Continued, "two children from their answer and approval, their parent from each child's end, and the parent of the child the always rule let run")
}
