package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A call that was executing when its instance died, and is not idempotent,
// is settled by the resume as "outcome unknown": recovery's settlement,
// not a body that returned, so not progress (DESIGN §6.6). The resumed
// turn keeps its count until something of it makes progress; were the
// settlement progress, a turn whose every resume dies after settling a
// call would never reach the budget.
func TestUnknownOutcomeSettlementIsNotProgress(t *testing.T) {
	tr, _ := resumedAfterProgress(t, func(n int64, reached chan<- struct{}) scriptStep {
		if n == 1 { // the first instance dies in hold
			return scriptStep{chunks: toolCall("hold", `{}`)}
		}
		// The resumed turn settled hold as unknown, then asks the model.
		reached <- struct{}{}
		return scriptStep{stall: true}
	})
	assert.Equal(t, 1, tr.Claim("s").Attempts, "settling hold as unknown kept the resume count")
}
