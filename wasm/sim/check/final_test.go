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
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// finalFixture writes a tree whose operator made the ask on ahook final:
// a call of it asks and is approved always, which saves no rule, so the
// next call asks again and is approved once. It returns the tree's path,
// its ledger and the two requests' ids.
func finalFixture(t *testing.T) (string, *check.Ledger, [2]string) {
	t.Helper()
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	rc := &receivers{clock: tr.Clock, gseq: gseq, entered: make(chan string, 1), ledger: check.Ledger{
		Tools: map[string]bool{"hook": false, "ihook": true, "ahook": false}, FinalAsks: []string{"ahook"}}}
	ahook := tool.Func{DefaultPermission: "ask", Name: "ahook", Run: func(ctx context.Context, c tool.Call) (string, error) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.ledger.Record(check.Delivery{At: tr.Clock.Now(), Tool: "ahook", CallID: c.ID, Key: c.IdempotencyKey, Gseq: gseq()})
		return "applied", nil
	}}
	reg, err := tool.NewRegistry(append(rc.tools(), ahook)...)
	require.NoError(t, err)
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "ahook", Resource: "*", Decision: permission.Ask, Final: true}})
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, cfg)
	require.NoError(t, err)
	ctx := context.Background()

	n := tr.Boot(r)
	const root = "f"
	n.NewSession(root)
	var ids [2]string
	for i, decision := range []string{core.ReplyAlways, core.ReplyOnce} {
		n.Admit(root, fmt.Sprintf("/tool ahook {\"n\":%d}\ncall %d", i+1, i+1))
		n.Idle()
		sent := gseq()
		bs, err := n.Inst.Blockers(ctx, root, event.KindPermission)
		require.NoError(t, err)
		require.Len(t, bs, 1, "call %d asks", i+1)
		ids[i] = bs[0].ID
		rc.ledger.Listings = append(rc.ledger.Listings, check.Listing{Session: root, Kind: "permission", At: tr.Clock.Now(), Sent: sent, Answered: gseq(), IDs: []string{ids[i]}})
		rep := check.Reply{Session: root, Question: ids[i], ResponseID: fmt.Sprintf("r%d", i+1), Sent: gseq()}
		_, err = n.Inst.Reply(ctx, root, ids[i], core.Reply{Kind: event.KindPermission, ResponseID: rep.ResponseID, Decision: decision})
		require.NoError(t, err)
		rep.Status, rep.At, rep.Answered = 200, tr.Clock.Now(), gseq()
		rc.ledger.Replies = append(rc.ledger.Replies, rep)
		n.Idle()
	}
	n.Crash()

	path, l := written(t, tr, rc)
	return path, l, ids
}

// An always reply to a final ask saves nothing, and the next call asks
// again: the fixture is clean, and is judged clean only with the final
// asks in the ledger (without them, always-rule-kept misses its rule).
func TestFinalAskHistoryIsClean(t *testing.T) {
	path, ledger, _ := finalFixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "final"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all, strings.Join(all, "\n"))
	assert.Equal(t, 2, res.Questions)
	assert.Zero(t, res.AlwaysRules)
}

// For each way a bug could let a call past a final ask, a history broken
// so, and the checker names the rule.
func TestBrokenFinalAskHistoriesAreCaught(t *testing.T) {
	path, clean, ids := finalFixture(t)
	parkOf := func(id string) string {
		return fmt.Sprintf(`session_id = 'f' AND type = '%s' AND json_extract(data, '$.blockers[0].id') = '%s'`, event.StepParked, id)
	}
	cases := []tamperCase{
		{name: "an always reply to a final ask saves a rule", want: check.RuleFinalAsk, detail: "which the request lists as final",
			sql: []string{appendEvent("f", event.PermissionRuleSaved, fmt.Sprintf(`json_object('rule_id', '%s-0', 'blocker_id', '%s', 'action', 'ahook', 'resource', 'tool:ahook', 'decision', 'allow', 'exact', json('true'))`, ids[0], ids[0]))}},
		{name: "a request for a final ask that does not list it as final", want: check.RuleFinalAsk, detail: "without listing it as final",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_remove(data, '$.blockers[0].request.final') WHERE %s`, parkOf(ids[1]))}},
		{name: "a call of a final ask runs on its predecessor's approval", want: check.RuleFinalAsk, detail: "runs without an approval of its own",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s' WHERE type = '%s' AND json_extract(data, '$.blocker_id') = '%s'`,
				event.PermissionRejected, event.PermissionApproved, ids[1])}},
	}
	requireCaught(t, path, clean, "seed 7 tree 3", cases)

	// Without the final asks in the ledger, the always reply that saved
	// nothing is a lost rule.
	l := *clean
	l.FinalAsks = nil
	p := copyTree(t, path)
	tamper(t, p, fmt.Sprintf(`UPDATE events SET data = json_remove(data, '$.blockers[0].request.final') WHERE %s`, parkOf(ids[0])))
	res, err := check.Tree(p, &l, check.Options{Label: "final"})
	require.NoError(t, err)
	require.NotEmpty(t, res.Violations)
	assert.Equal(t, check.RuleAlways, res.Violations[0].Rule)
}
