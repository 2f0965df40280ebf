package runner_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
)

// A result that says a permission request stopped the call (the person
// declined it, or the request was cancelled) is kept whole like NoResult
// and NotRun, stored or made up for a call whose turn ended while it
// waited: elided, "you declined" read as "[tool output elided …]", an
// output the call gave. The size query counts it whole too: a request
// that fits exactly leaves nothing out, and one byte less leaves out the
// first exchange instead of eliding the result.
func TestPermissionResultsKeptWholeAndCountedAtTheirSize(t *testing.T) {
	permission := event.KindPermission
	said := strings.Repeat("Not on a Friday. ", 120) // longer than its marker
	cases := []struct {
		name string
		end  func(t *testing.T, c *cancelRun)
		want string // the first turn's result, as the next turns read it
	}{
		{"rejected with a message (stored)", func(t *testing.T, c *cancelRun) {
			c.reply(t, permission, "deploy", permReply("r1", core.ReplyReject, said))
		}, core.DeclinedByUser + " The user said: " + said},
		{"rejected with a message, then an interrupt (made up)", func(t *testing.T, c *cancelRun) {
			c.gate.held.Store(true) // the continuation never settles the call
			c.reply(t, permission, "deploy", permReply("r1", core.ReplyReject, said))
			<-c.gate.started
			c.interrupt(t)
			c.n.Idle()
			c.gate.held.Store(false)
		}, core.DeclinedByUser + " The user said: " + said},
		{"interrupted while it waited (made up)", func(t *testing.T, c *cancelRun) {
			c.interrupt(t)
		}, core.PermissionCancelledOutput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lastRequest := func(budget int) model.Request {
				c := newCancelRunOf(t, runner.NewConfig().WithContextBytes(budget), "deploy")
				tc.end(t, c)
				c.n.Idle()
				for i := range 2 {
					c.n.Admit("s", prompt(i, 1000, 0))
					c.n.Idle()
				}
				c.m.mu.Lock()
				defer c.m.mu.Unlock()
				return c.m.lastReq
			}
			whole := lastRequest(1 << 30)
			require.Equal(t, -1, omittedCount(whole))
			require.Equal(t, []string{tc.want}, toolTexts(whole))
			budget := leastBytes(whole)

			req := lastRequest(budget)
			assert.Equal(t, -1, omittedCount(req), "nothing needs to be left out")
			assert.Equal(t, budget, requestTextBytes(req))
			assert.Equal(t, toolTexts(whole), toolTexts(req), "the result is not elided")

			req = lastRequest(budget - 1)
			assert.Positive(t, omittedCount(req), "the first exchange is left out")
			assert.Empty(t, toolTexts(req), "the result is not elided")
			assert.LessOrEqual(t, requestTextBytes(req), budget-1)
		})
	}
}
