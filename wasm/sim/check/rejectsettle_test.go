package check_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// A permission request rejected without a message ends the turn, and the
// reply's own commit settles its call declined: the checker takes that,
// and names a call that such a reject left without its result.
func TestAPlainRejectSettlesItsCallDeclined(t *testing.T) {
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	rc := &receivers{clock: tr.Clock, gseq: gseq, entered: make(chan string, 1), ledger: check.Ledger{
		Tools: map[string]bool{"hook": false, "ihook": true, "ahook": false}}}
	ahook := tool.Func{DefaultPermission: "ask", Name: "ahook", Run: func(context.Context, tool.Call) (string, error) {
		t.Error("a rejected call ran")
		return "applied", nil
	}}
	reg, err := tool.NewRegistry(append(rc.tools(), ahook)...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	ctx := context.Background()
	n := tr.Boot(r)
	const root = "p"
	n.NewSession(root)
	pid := n.Admit(root, "/tool ahook {}\nthen")
	n.Idle()
	sent := gseq()
	bs, err := n.Inst.Blockers(ctx, root, event.KindPermission)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	rc.ledger.Listings = append(rc.ledger.Listings, check.Listing{Session: root, Kind: "permission", At: tr.Clock.Now(), Sent: sent, Answered: gseq(), IDs: []string{bs[0].ID}})
	rep := check.Reply{Session: root, Question: bs[0].ID, ResponseID: "r1", Cancel: true, Sent: gseq()} // a reject, as the ledger has it
	_, err = n.Inst.Reply(ctx, root, bs[0].ID, core.Reply{Kind: event.KindPermission, ResponseID: rep.ResponseID, Decision: core.ReplyReject})
	require.NoError(t, err)
	rep.Status, rep.At, rep.Answered = 200, tr.Clock.Now(), gseq()
	rc.ledger.Replies = append(rc.ledger.Replies, rep)
	n.Idle()
	require.Equal(t, "interrupted", tr.PromptState(pid))
	n.Crash()
	path, clean := written(t, tr, rc)

	res, err := check.Tree(path, clean, check.Options{Label: "reject"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all, strings.Join(all, "\n"))
	requireCaught(t, path, clean, "reject", []tamperCase{
		{name: "a plain reject's call left without a result", want: check.RuleApproval, detail: "is not settled declined",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.outcome', 'error') WHERE session_id = '%s' AND type = '%s' AND json_extract(data, '$.call_id') = '%s'`,
				root, event.ToolSettled, bs[0].CallID)}},
	})
}
