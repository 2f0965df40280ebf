package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// leaveOut is the decision as planTranscript made it before it read newest
// first, kept as the reference the planner must match: every unit of the
// session read, oldest first, and exchanges left out while the rest, with
// the notice, is past the budget.
func leaveOut(units []contextUnit, budget, keep int) (n, messages int) {
	total := 0
	for _, u := range units {
		total += u.least
	}
	for n < keep && total+omittedSize(messages) > budget {
		for first := true; n < keep && (first || !units[n].opens); first = false {
			total -= units[n].least
			messages += units[n].messages
			n++
		}
	}
	return n, messages
}

// allTranscriptSizes is the read planTranscript made before: every unit of
// the session, oldest first, each as unitSizes counts it.
const allTranscriptSizes = `SELECT m.seq, m.role, ` + unitSizes + `
	FROM messages m WHERE m.session_id = ?1 AND m.role != 'tool' ORDER BY m.seq`

// planEveryUnit is planTranscript as it was: it reads allTranscriptSizes
// and decides with leaveOut.
func planEveryUnit(tx storage.Tx, sessionID string, budget int) (from int64, omitted int, err error) {
	res, err := tx.Query(allTranscriptSizes, transcriptSizesArgs(sessionID)...)
	if err != nil {
		return 0, 0, err
	}
	units, roles := readUnits(res)
	n, omitted := leaveOut(units, budget, keepOf(roles))
	if n == 0 {
		return 0, 0, nil
	}
	return units[n].seq, omitted, nil
}

func readUnits(res *storage.Rows) ([]contextUnit, []string) {
	units := make([]contextUnit, res.Len())
	roles := make([]string, res.Len())
	for i := range units {
		res.Next()
		u := &units[i]
		if err := res.Scan(&u.seq, &roles[i], &u.messages, &u.least); err != nil {
			panic(err)
		}
		u.messages++
		u.opens = roles[i] != event.RoleAssistant
	}
	return units, roles
}

// keepOf is the index of the current prompt: the last user message, 0
// without one.
func keepOf(roles []string) int {
	keep := 0
	for i, r := range roles {
		if r == event.RoleUser {
			keep = i
		}
	}
	return keep
}

// fitNewestFirst is planTranscript's decision on units held in memory:
// fitting fed newest first until it stops, and the units' total.
func fitNewestFirst(units []contextUnit, roles []string, budget int) (from int64, omitted int) {
	f := fitting{budget: budget}
	total := 0
	for _, u := range units {
		total += u.messages
	}
	for i := len(units) - 1; i >= 0; i-- {
		if !f.add(units[i], roles[i] == event.RoleUser) {
			return f.decide(total)
		}
	}
	return f.decide(f.messages)
}

// edgeBudgets are budgets on and next to every point where the decision
// changes: for each unit, the size from it on, alone and with the notice
// of what the units before it stand for, and a byte either side, plus
// none, a negative one and one past everything.
func edgeBudgets(units []contextUnit) []int {
	budgets := []int{-1, 0}
	size, before := 0, 0
	for _, u := range units {
		size += u.least
		before += u.messages
	}
	budgets = append(budgets, size+1000)
	for _, u := range units {
		for _, b := range []int{size, size + omittedSize(before)} {
			budgets = append(budgets, b-1, b, b+1)
		}
		size -= u.least
		before -= u.messages
	}
	return budgets
}

// randomUnits is a transcript of up to max units: prompts, notices and
// answers with up to 12 calls each (so that the count crosses 9 and 99,
// where the notice grows by a byte), some empty (a unit of size 0 leaves
// a byte of notice to make up), some large.
func randomUnits(rng *rand.Rand, max int) ([]contextUnit, []string) {
	n := rng.IntN(max + 1)
	units := make([]contextUnit, n)
	roles := make([]string, n)
	seq := int64(0)
	for i := range units {
		seq += 1 + rng.Int64N(3)
		switch r := rng.IntN(10); {
		case r < 3:
			roles[i] = event.RoleUser
		case r < 4:
			roles[i] = event.RoleNotice
		default:
			roles[i] = event.RoleAssistant
		}
		least := 0
		switch rng.IntN(4) {
		case 0:
		case 1:
			least = rng.IntN(4)
		case 2:
			least = rng.IntN(200)
		default:
			least = rng.IntN(5000)
		}
		messages := 1
		if roles[i] == event.RoleAssistant && rng.IntN(2) == 0 {
			messages += rng.IntN(13)
		}
		units[i] = contextUnit{seq: seq, messages: messages, least: least, opens: roles[i] != event.RoleAssistant}
	}
	return units, roles
}

// Read newest first and stopped once past the budget, the planner decides
// as leaveOut over every unit: the same first message, the same count,
// over many random transcripts at every budget where the decision
// changes (seed in the failure).
func TestFittingDecidesAsLeaveOut(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	for c := range 20_000 {
		units, roles := randomUnits(rng, 60)
		keep := keepOf(roles)
		budgets := edgeBudgets(units)
		for range 4 {
			budgets = append(budgets, rng.IntN(60_000)-10)
		}
		for _, budget := range budgets {
			n, messages := leaveOut(units, budget, keep)
			var wantFrom int64
			if n > 0 {
				wantFrom = units[n].seq
			}
			from, omitted := fitNewestFirst(units, roles, budget)
			if from != wantFrom || omitted != messages {
				t.Fatalf("seed %d case %d budget %d keep %d: got from %d omitted %d, leaveOut from %d (unit %d) omitted %d\nunits %+v\nroles %v",
					seed, c, budget, keep, from, omitted, wantFrom, n, messages, units, roles)
			}
		}
	}
}

// randomSession stores a random transcript for session id as the
// projection stores one: prompts and notices, answers with calls in
// tool_calls (of the session, with the answer's id as step), their
// results (role tool, id the call's and ".result") some of them
// declined, missing or stored after a later exchange's notice. With
// ties, seqs shared by messages (the projection makes none): they go by
// rowid, as the index keeps them.
func randomSession(t *testing.T, tx storage.Tx, rng *rand.Rand, id string, max int, ties bool) {
	t.Helper()
	seq := int64(0)
	text := func() string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("p", rng.IntN(5))
		case 2:
			return strings.Repeat("q", rng.IntN(300))
		}
		return strings.Repeat("r", rng.IntN(4000))
	}
	insert := func(msgID, role, body, callID string) {
		if !ties || rng.IntN(4) != 0 {
			seq++
		}
		var call any
		if callID != "" {
			call = callID
		}
		_, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, role, text, created_at, tool_call_id) VALUES (?, ?, ?, ?, ?, 0, ?)`,
			msgID, id, seq, role, body, call)
		require.NoError(t, err)
	}
	var late []string // results stored after the next exchange opens
	for i := range rng.IntN(max + 1) {
		msgID := fmt.Sprintf("%s-m%d", id, i)
		switch r := rng.IntN(10); {
		case r < 3, r == 3:
			role := event.RoleUser
			if r == 3 {
				role = event.RoleNotice
			}
			insert(msgID, role, text(), "")
			for _, c := range late {
				insert(c+".result", event.RoleTool, text(), c)
			}
			late = nil
		default:
			insert(msgID, event.RoleAssistant, text(), "")
			for k := range rng.IntN(13) * rng.IntN(2) {
				callID := fmt.Sprintf("%s-c%d", msgID, k)
				phase, outcome := event.PhaseSettled, any(nil)
				if rng.IntN(5) == 0 {
					outcome = event.OutcomeDeclined
				}
				if rng.IntN(6) == 0 {
					phase = []event.Phase{event.PhaseCalled, event.PhaseExecuting, event.PhaseWaiting}[rng.IntN(3)]
				}
				_, err := tx.Exec(`INSERT INTO tool_calls (id, session_id, step_id, idx, name, arguments, phase, outcome) VALUES (?, ?, ?, ?, 'f', ?, ?, ?)`,
					callID, id, msgID, k, strings.Repeat("a", rng.IntN(100)), string(phase), outcome)
				require.NoError(t, err)
				switch {
				case phase != event.PhaseSettled:
				case rng.IntN(8) == 0:
					late = append(late, callID)
				default:
					insert(callID+".result", event.RoleTool, text(), callID)
				}
			}
		}
	}
}

// The planner's read, newest first in pages, decides as the read of
// every unit did, on random sessions stored as the projection stores
// them, beside others of the same tree, with pages of one, two or three
// and the ones it reads: at budgets where the decision changes (seed in
// the failure).
func TestPlanTranscriptDecidesAsBefore(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	tr := treetest.New(t)
	tr.Boot(treetest.NewDriver(1))
	_, db, _ := tr.Host()
	first, last := firstSizesPage, lastSizesPage
	t.Cleanup(func() { firstSizesPage, lastSizesPage = first, last })
	pages := [][2]int{{1, 1}, {2, 3}, {first, last}}
	sessions := 30
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		for s := range sessions {
			randomSession(t, tx, rng, fmt.Sprintf("s%d", s), 60, s%3 == 0)
		}
		return nil
	}))
	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
			res, err := tx.Query(allTranscriptSizes, transcriptSizesArgs(id)...)
			if err != nil {
				return err
			}
			units, roles := readUnits(res)
			budgets := edgeBudgets(units)
			rng.Shuffle(len(budgets), func(i, j int) { budgets[i], budgets[j] = budgets[j], budgets[i] })
			for _, budget := range budgets[:min(len(budgets), 12)] {
				n, wantOmitted := leaveOut(units, budget, keepOf(roles))
				var wantFrom int64
				if n > 0 {
					wantFrom = units[n].seq
				}
				for _, p := range pages {
					firstSizesPage, lastSizesPage = p[0], p[1]
					from, omitted, err := planTranscript(jsNumberTx{tx}, id, budget)
					if err != nil {
						return err
					}
					if from != wantFrom || omitted != wantOmitted {
						t.Fatalf("seed %d session %s budget %d pages %v: got from %d omitted %d, want from %d omitted %d (units %+v)",
							seed, id, budget, p, from, omitted, wantFrom, wantOmitted, units)
					}
				}
			}
			return nil
		}))
	}
}

// A page of planTranscript's read walks the session's messages but tool
// results (messages_sent) from the page's start down, sorting only the
// ties on seq, so that its LIMIT stops the walk; the count of what it
// did not read reads the indexes alone. Nothing scans a table: read
// whole, 20,000 messages took 80 to 700 ms every step
// (BenchmarkPlanTranscriptOfALongSession). The plan, not a timing, is
// what this test checks.
func TestPlanTranscriptReadsByTheIndexes(t *testing.T) {
	tr := treetest.New(t)
	tr.Boot(treetest.NewDriver(1))
	page, parents := planDetails(tr.QueryPlan(transcriptSizes, append(transcriptSizesArgs("s"), int64(1)<<62, int64(1)<<62, 32)...))
	require.NotEmpty(t, page)
	require.Contains(t, page, "SEARCH m USING INDEX messages_sent (session_id=? AND seq<?)")
	for i, line := range page {
		require.NotRegexp(t, `^SCAN `, line, "plan %q", page)
		if parents[i] == 0 {
			require.NotEqual(t, "USE TEMP B-TREE FOR ORDER BY", line, "the page is sorted whole, not walked in order: %q", page)
		}
	}
	require.Contains(t, page, "USE TEMP B-TREE FOR LAST TERM OF ORDER BY", "ties on seq go by rowid")

	count, _ := planDetails(tr.QueryPlan(requestMessages, "s"))
	require.Contains(t, count, "SEARCH messages USING COVERING INDEX messages_sent (session_id=?)")
	require.Contains(t, count, "SEARCH tool_calls USING COVERING INDEX tool_calls_by_session (session_id=?)")
	for _, line := range count {
		require.NotRegexp(t, `^SCAN (messages|tool_calls)`, line, "plan %q", count)
	}
}

// planDetails is what each line of plan does, and its parent node.
func planDetails(plan []treetest.PlanLine) (details []string, parents []int64) {
	for _, l := range plan {
		details, parents = append(details, l.Detail), append(parents, l.Parent)
	}
	return details, parents
}

// jsNumberTx binds only the integers a Durable Object binds
// (storage.FitsJSNumber), so that a query's argument that works on SQLite
// but fails every step on Cloudflare (math.MaxInt64 as an open bound did,
// found by the workerd walk-through) fails here too.
type jsNumberTx struct{ storage.Tx }

func (tx jsNumberTx) Exec(query string, args ...any) (int64, error) {
	if err := fitsJSNumbers(args); err != nil {
		return 0, err
	}
	return tx.Tx.Exec(query, args...)
}

func (tx jsNumberTx) Query(query string, args ...any) (*storage.Rows, error) {
	if err := fitsJSNumbers(args); err != nil {
		return nil, err
	}
	return tx.Tx.Query(query, args...)
}

func fitsJSNumbers(args []any) error {
	for i, a := range args {
		var n int64
		switch v := a.(type) {
		case int:
			n = int64(v)
		case int64:
			n = v
		default:
			continue
		}
		if !storage.FitsJSNumber(n) {
			return fmt.Errorf("argument %d, %d, does not fit a JS number: a Durable Object refuses it", i+1, n)
		}
	}
	return nil
}
