package runner_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

const colourQuestion = `{"questions":[{"question":"Which colour?","choices":["red","green"]}]}`

// askSteps: step 1 calls the non-idempotent "once" tool and asks a
// question in the same answer; once both calls have results (2 tool
// messages) the model answers in text.
func askSteps(k int) scriptStep {
	if k == 1 {
		return scriptStep{chunks: []model.Chunk{
			{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "once", Arguments: `{"n":1}`}},
			{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: tool.QuestionName, Arguments: colourQuestion}},
			{Finish: model.FinishToolCalls},
		}}
	}
	return scriptStep{chunks: text("painted ", "it")}
}

// askRun is one tree with the ask script, its ledger of tool bodies and a
// check that no recorded step is requested again.
type askRun struct {
	tr  *treetest.Tree
	m   *scriptModel
	l   *ledger
	sid string
}

func newAskRun(t *testing.T) *askRun {
	c := &askRun{tr: treetest.New(t), l: newLedger(), sid: "s"}
	c.m = &scriptModel{steps: askSteps, recorded: func(k int) bool {
		if k == 1 {
			return completedSteps(c.tr, c.sid) >= 1
		}
		return completedSteps(c.tr, c.sid) >= 2
	}}
	return c
}

func (c *askRun) boot(t *testing.T) *treetest.Node {
	return c.tr.Boot(newRunner(t, c.m, runner.NewConfig(), c.l.tool("once", false), tool.QuestionTool()))
}

func (c *askRun) admit(n *treetest.Node, clientID, text string) (string, error) {
	a, err := n.Inst.Admit(ctx, c.sid, core.PromptInput{ClientID: clientID, Text: text})
	return a.PromptID, err
}

// parked creates the session and admits "paint it", whose turn parks on
// one question: the prompt's id and that question.
func (c *askRun) parked(t *testing.T, n *treetest.Node) (string, core.Blocker) {
	t.Helper()
	n.NewSession(c.sid)
	pid, err := c.admit(n, "p1", "paint it")
	require.NoError(t, err)
	n.Idle()
	asked := questions(t, n, c.sid)
	require.Len(t, asked, 1)
	return pid, asked[0]
}

// questions lists the session's pending questions through the instance.
func questions(t *testing.T, n *treetest.Node, sid string) []core.Blocker {
	t.Helper()
	bs, err := n.Inst.Blockers(ctx, sid, event.KindQuestion)
	require.NoError(t, err)
	return bs
}

func snapshotStatus(t *testing.T, n *treetest.Node, sid string) string {
	t.Helper()
	snap, err := n.Inst.Snapshot(ctx, sid, 0, 50)
	require.NoError(t, err)
	return snap.Status
}

// startedWith counts the session's executions started with cause.
func startedWith(t *testing.T, evs []event.Event, cause string) int {
	n := 0
	for _, e := range treetest.OfType(evs, event.ExecutionStarted) {
		var s event.Started
		require.NoError(t, e.Decode(&s))
		if s.Cause == cause {
			n++
		}
	}
	return n
}

// A session blocks on a question; the instance is torn down with the
// database kept; a fresh one boots and sweeps; the same question id is
// listed and answerable; the reply continues the turn with no repeated
// model call or tool side effect. Once for an answer, once for a cancel.
func TestQuestionOutlivesTheInstance(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			c := newAskRun(t)
			n := c.boot(t)
			n.NewSession(c.sid)
			pid, err := c.admit(n, "p1", "paint it")
			require.NoError(t, err)
			n.Idle()

			asked := questions(t, n, c.sid)
			require.Len(t, asked, 1)
			q := asked[0]
			assert.True(t, strings.HasPrefix(q.ID, "q-") && strings.HasSuffix(q.ID, "-0"), q.ID)
			assert.JSONEq(t, colourQuestion, string(q.Request))
			assert.Equal(t, core.StatusWaiting, snapshotStatus(t, n, c.sid))
			assert.False(t, c.tr.Claim(c.sid).Exists, "a parked turn holds no claim")
			assert.Equal(t, "running", c.tr.PromptState(pid), "a parked turn has not ended")
			require.Len(t, treetest.OfType(c.tr.Events(c.sid), event.StepParked), 1)
			assert.Equal(t, 1, c.l.count("once"), "the step's ordinary call ran before parking")

			n.Crash()
			n2 := c.boot(t)
			assert.Zero(t, n2.Report.Count(core.Resume)+n2.Report.Count(core.Start), "the sweep has nothing to run")
			again := questions(t, n2, c.sid)
			require.Len(t, again, 1)
			assert.Equal(t, q.ID, again[0].ID, "the same question id after a restart")

			// A prompt admitted while parked is queued, not promoted.
			queued, err := c.admit(n2, "p2", "next one")
			require.NoError(t, err)
			n2.Idle()
			assert.Equal(t, "queued", c.tr.PromptState(queued))
			assert.Len(t, treetest.OfType(c.tr.Events(c.sid), event.ExecutionStarted), 1, "nothing started while parked")
			assert.False(t, c.tr.Claim(c.sid).Exists, "the queued prompt took no claim")
			assert.Equal(t, core.StatusWaiting, snapshotStatus(t, n2, c.sid))

			reply := core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}
			if cancel {
				reply = core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true}
			}
			res, err := n2.Inst.Reply(ctx, c.sid, q.ID, reply)
			require.NoError(t, err)
			n2.Idle()

			evs := c.tr.Events(c.sid)
			assert.Equal(t, 1, c.m.Requests(1), "the parked step was asked of the model once")
			assert.Zero(t, c.m.Requests(2), "the model is never asked with the question unanswered")
			assert.Equal(t, 1, c.l.count("once"), "the settled tool did not run again")
			assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "no resume: parking is not a death")
			assert.Empty(t, questions(t, n2, c.sid))
			if cancel {
				assert.Equal(t, core.BlockerCancelled, res.State)
				assert.Equal(t, "interrupted", c.tr.PromptState(pid))
				assert.Equal(t, "cancelled", c.tr.PromptState(queued), "the cancel ends the turn like an interrupt")
				cancels := treetest.OfType(evs, event.PromptCancelled)
				require.Len(t, cancels, 1)
				var cancelled event.Cancelled
				require.NoError(t, cancels[0].Decode(&cancelled))
				assert.Equal(t, event.Cancelled{PromptID: queued, Reason: event.ReasonUser}, cancelled, "cancelled by the user, as by an interrupt")
				assert.Zero(t, startedWith(t, evs, event.CauseResolution))
				assert.Equal(t, 0, c.m.Requests(3), "no continuation")
				assert.Len(t, treetest.OfType(evs, event.QuestionCancelled), 1)
			} else {
				assert.Equal(t, core.BlockerAnswered, res.State)
				assert.Equal(t, "succeeded", c.tr.PromptState(pid))
				assert.Equal(t, "succeeded", c.tr.PromptState(queued), "the queued prompt ran after the turn ended")
				assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
				assert.Equal(t, 2, c.m.Requests(3), "one new step for the continuation, one for the queued prompt")
				assert.Len(t, treetest.OfType(evs, event.QuestionAnswered), 1)
				out := questionOutput(t, evs, q.CallID)
				assert.Contains(t, out, `"Which colour?" → "green"`)
			}
			assert.False(t, c.tr.Claim(c.sid).Exists)
		})
	}
}

// questionOutput is the settled output of the question call.
func questionOutput(t *testing.T, evs []event.Event, callID string) string {
	t.Helper()
	var outs []string
	for _, e := range treetest.OfType(evs, event.ToolSettled) {
		var s event.Settled
		require.NoError(t, e.Decode(&s))
		if s.CallID == callID {
			outs = append(outs, s.Output)
		}
	}
	require.Len(t, outs, 1, "the question call settles exactly once")
	return outs[0]
}

// requireBootedOrKilled checks a recovery.BootWith whose database is set
// to die at a later commit. The sweep starts the turn in its own
// goroutine, so the turn can reach that commit, and kill the database,
// before the boot's own last act (the re-arm) reads it: the boot then
// reports the kill beside its instance. Anything else is a failure.
func requireBootedOrKilled(t *testing.T, inst *core.Instance, err error) {
	t.Helper()
	if err != nil {
		require.ErrorIs(t, err, fakehost.ErrKilled)
	}
	require.NotNil(t, inst)
}

// dead reports whether the node's database was killed.
func dead(n *treetest.Node) bool {
	select {
	case <-n.Kill.Died():
		return true
	default:
		return false
	}
}

// Kill before and after every commit from the admission through the park,
// the reply and the continuation to the turn's end, with the client
// retrying its admission and its reply (same ids) on the fresh instance:
// each time the question is answered once, the turn continues exactly
// once, the parked step is never requested again once recorded, and the
// non-idempotent tool never runs twice.
func TestQuestionKilledAtEveryCommit(t *testing.T) {
	reply := core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}
	answer := func(n *treetest.Node, sid string) error {
		bs, err := n.Inst.Blockers(ctx, sid, "")
		if err != nil || len(bs) == 0 {
			return err
		}
		_, err = n.Inst.Reply(ctx, sid, bs[0].ID, reply)
		return err
	}
	clean := newAskRun(t)
	n := clean.boot(t)
	n.NewSession(clean.sid)
	base := n.Kill.Commits()
	_, err := clean.admit(n, "p1", "paint it")
	require.NoError(t, err)
	n.Idle()
	require.NoError(t, answer(n, clean.sid))
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Equal(t, "succeeded", clean.tr.PromptState(promptID(t, clean.tr, clean.sid)))

	for i := 1; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				c := newAskRun(t)
				n := c.boot(t)
				n.NewSession(c.sid)
				n.Kill.KillAt(i, after)
				_, _ = c.admit(n, "p1", "paint it")
				n.Idle()
				var qid string
				if !dead(n) {
					bs := questions(t, n, c.sid)
					require.Len(t, bs, 1)
					qid = bs[0].ID
					_ = answer(n, c.sid) // may die inside the reply
					n.Idle()
				}
				require.True(t, dead(n), "commit %d is within the run", i)
				n.Crash()

				n2 := c.boot(t)
				_, err := c.admit(n2, "p1", "paint it")
				require.NoError(t, err, "the client's retried admission is deduplicated")
				n2.Idle()
				if qid == "" {
					bs := questions(t, n2, c.sid)
					require.Len(t, bs, 1, "the question was asked by the fresh instance")
					qid = bs[0].ID
				}
				// The client retries its reply (it may have seen no answer).
				res, err := n2.Inst.Reply(ctx, c.sid, qid, reply)
				require.NoError(t, err)
				assert.Equal(t, core.BlockerAnswered, res.State)
				n2.Idle()

				evs := c.tr.Events(c.sid)
				terms := treetest.Terminals(evs)
				require.Len(t, terms, 1, "one terminal")
				assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
				assert.Empty(t, c.m.violations, "no recorded step requested again")
				assert.Len(t, treetest.OfType(evs, event.StepParked), 1, "parked once")
				assert.Len(t, treetest.OfType(evs, event.QuestionAnswered), 1, "answered once")
				assert.LessOrEqual(t, c.l.count("once"), 1, "the non-idempotent tool ran at most once")
				questionOutput(t, evs, strings.TrimSuffix(strings.TrimPrefix(qid, "q-"), "-0"))
				assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution), "exactly one continuation")
				assert.Empty(t, questions(t, n2, c.sid))
				assert.False(t, c.tr.Claim(c.sid).Exists)
			})
		}
	}
	t.Logf("ask, park, reply and continue: %d commits, %d crash runs", commits, 2*commits)
}

// A reply's response_id is its idempotency key, checked by core itself (a
// Go program calls Reply with no HTTP decoding in front): missing, blank or
// too long, the reply is invalid and nothing is written.
func TestReplyNeedsAResponseID(t *testing.T) {
	c := newAskRun(t)
	n := c.boot(t)
	_, q := c.parked(t, n)
	before := len(c.tr.Events(c.sid))
	for name, id := range map[string]string{
		"missing":  "",
		"blank":    " \t ",
		"too long": strings.Repeat("r", core.MaxResponseIDLen+1),
	} {
		_, err := n.Inst.Reply(ctx, c.sid, q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: id, Answers: [][]string{{"red"}}})
		assert.ErrorIs(t, err, core.ErrInvalid, name)
	}
	assert.Equal(t, before, len(c.tr.Events(c.sid)), "nothing written")
	assert.Len(t, questions(t, n, c.sid), 1, "the question still waits")

	_, err := n.Inst.Reply(ctx, c.sid, q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: strings.Repeat("r", core.MaxResponseIDLen), Answers: [][]string{{"red"}}})
	require.NoError(t, err, "a response_id of the most bytes allowed")
	n.Idle()
}

// Two different replies race: exactly one wins, the other is a conflict
// that names the winner; the winner's own retry is the same 200.
func TestQuestionRepliesRace(t *testing.T) {
	c := newAskRun(t)
	n := c.boot(t)
	_, q := c.parked(t, n)

	replies := []core.Reply{
		{Kind: event.KindQuestion, ResponseID: "a", Answers: [][]string{{"red"}}},
		{Kind: event.KindQuestion, ResponseID: "b", Answers: [][]string{{"green"}}},
	}
	type result struct {
		res core.Resolution
		err error
	}
	out := make(chan result, 2)
	for _, r := range replies {
		go func() {
			res, err := n.Inst.Reply(ctx, c.sid, q.ID, r)
			out <- result{res, err}
		}()
	}
	var won []core.Resolution
	var lost []*core.ReplyConflict
	for range replies {
		r := <-out
		var conflict *core.ReplyConflict
		switch {
		case r.err == nil:
			won = append(won, r.res)
		case errors.As(r.err, &conflict):
			lost = append(lost, conflict)
		default:
			t.Fatalf("reply failed: %v", r.err)
		}
	}
	require.Len(t, won, 1)
	require.Len(t, lost, 1)
	assert.Equal(t, won[0].ResponseID, lost[0].Winner.ResponseID, "the loser is shown the winner")
	assert.Equal(t, won[0].Reply.Answers, lost[0].Winner.Reply.Answers)
	n.Idle()

	winner := replies[0]
	if won[0].ResponseID == "b" {
		winner = replies[1]
	}
	assert.Equal(t, winner, won[0].Reply, "the resolution carries the winning reply as it was sent")
	assert.Equal(t, winner, lost[0].Winner.Reply)
	again, err := n.Inst.Reply(ctx, c.sid, q.ID, winner)
	require.NoError(t, err, "the winner's retry is the original outcome")
	assert.True(t, again.Duplicate)
	assert.Equal(t, won[0].ResolvedAt, again.ResolvedAt)

	changed := winner
	changed.Answers = [][]string{{"red"}, {"green"}}
	_, err = n.Inst.Reply(ctx, c.sid, q.ID, changed)
	var conflict *core.ReplyConflict
	require.ErrorAs(t, err, &conflict, "the same response_id with another body is a conflict")

	evs := c.tr.Events(c.sid)
	assert.Len(t, treetest.OfType(evs, event.QuestionAnswered), 1)
	assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
	assert.Len(t, treetest.Terminals(evs), 1)
}

// A reply races an interrupt of the waiting session: one of them resolves
// the question, never both. If the interrupt won, the reply is a conflict
// naming the interrupt's cancellation; if the reply won, the interrupt
// ends the continuation but cancels nothing already answered.
func TestQuestionReplyRacesInterrupt(t *testing.T) {
	outcomes := map[string]int{}
	// Two runs in a fixed order cover both winners; the others race.
	orders := []string{"reply-first", "interrupt-first", "race", "race", "race", "race", "race", "race"}
	for i, order := range orders {
		t.Run(fmt.Sprintf("%s%d", order, i), func(t *testing.T) {
			c := newAskRun(t)
			n := c.boot(t)
			_, q := c.parked(t, n)

			replied := make(chan error, 1)
			doReply := func() {
				_, err := n.Inst.Reply(ctx, c.sid, q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r", Answers: [][]string{{"red"}}})
				replied <- err
			}
			switch order {
			case "reply-first":
				doReply()
			case "race":
				go doReply()
			}
			_, ierr := n.Inst.Interrupt(ctx, c.sid, event.ReasonUser)
			require.NoError(t, ierr)
			if order == "interrupt-first" {
				doReply()
			}
			rerr := <-replied
			n.Idle()

			evs := c.tr.Events(c.sid)
			answered := len(treetest.OfType(evs, event.QuestionAnswered))
			cancelled := len(treetest.OfType(evs, event.QuestionCancelled))
			require.Equal(t, 1, answered+cancelled, "resolved exactly once")
			var conflict *core.ReplyConflict
			if cancelled == 1 {
				require.ErrorAs(t, rerr, &conflict, "the interrupt won: the reply is refused")
				assert.Equal(t, event.CancelInterrupt, conflict.Winner.Reason)
				assert.Zero(t, startedWith(t, evs, event.CauseResolution), "no continuation after a cancellation")
				outcomes["interrupt"]++
			} else {
				require.NoError(t, rerr)
				require.NotEqual(t, "interrupt-first", order, "a reply after the interrupt committed must be refused")
				answeredAt := treetest.OfType(evs, event.QuestionAnswered)[0].Seq
				for _, term := range treetest.Terminals(evs) {
					assert.Greater(t, term.Seq, answeredAt, "an answer is never applied to a turn already ended")
				}
				outcomes["reply"]++
			}
			terms := treetest.Terminals(evs)
			require.Len(t, terms, 1)
			if cancelled == 1 {
				assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
			}
			assert.False(t, c.tr.Claim(c.sid).Exists)
		})
	}
	t.Logf("winners: %v", outcomes)
	assert.Positive(t, outcomes["reply"])
	assert.Positive(t, outcomes["interrupt"])
}

// The projections (blockers among them) rebuilt from the log equal the
// stored ones after a randomized history of questions asked, answered,
// cancelled and interrupted, with crashes and reboots in between.
func TestQuestionProjectionsEqualTheirRebuild(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			tr := treetest.New(t)
			reg, err := tool.NewRegistry(tool.Defaults()...)
			require.NoError(t, err)
			r, err := runner.New(offline.New(nil, offline.Options{}), reg, runner.NewConfig())
			require.NoError(t, err)
			n := tr.Boot(r)
			sessions := []string{n.NewSession("s0")}
			texts := []string{"/ask which?", "/tool kv_put {\"key\":\"k\",\"value\":\"v\"}\n/ask and then?", "hello", `/tool question {"questions":[{"question":"a or b?","choices":["a","b"]},{"question":"why?"}]}`}
			replies := 0
			for step := range 50 {
				sid := sessions[rng.IntN(len(sessions))]
				switch op := rng.IntN(10); {
				case op == 0:
					sessions = append(sessions, n.NewSession(fmt.Sprintf("s%d", step+1)))
				case op <= 3:
					_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: texts[rng.IntN(len(texts))]})
					require.NoError(t, err)
				case op <= 7:
					bs, err := n.Inst.Blockers(ctx, sid, "")
					require.NoError(t, err)
					if len(bs) == 0 {
						continue
					}
					var req tool.QuestionRequest
					require.NoError(t, json.Unmarshal(bs[0].Request, &req))
					reply := core.Reply{ResponseID: fmt.Sprint("r", replies), Cancel: op == 7}
					if !reply.Cancel {
						for _, q := range req.Questions {
							a := "free text"
							if len(q.Choices) > 0 {
								a = q.Choices[0]
							}
							reply.Answers = append(reply.Answers, []string{a})
						}
					}
					replies++
					_, err = n.Inst.Reply(ctx, sid, bs[0].ID, reply)
					require.NoError(t, err)
				case op == 8:
					_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
					require.NoError(t, err)
				default:
					n.Idle()
					n.Crash()
					n = tr.Boot(r)
				}
				n.Idle()
			}
			n.Idle()
			n.Crash()

			before := rebuildEquals(t, tr)
			states := map[string]int{}
			for _, row := range before["blockers"] {
				states[fmt.Sprint(row[9])]++ // the state column
			}
			t.Logf("blocker states: %v", states)
			require.NotEmpty(t, before["blockers"])
		})
	}
}

// rebuildEquals checks that the projections rebuilt from the log equal the
// stored ones, and returns the stored ones. The tree must be idle.
func rebuildEquals(t *testing.T, tr *treetest.Tree) map[string][][]any {
	t.Helper()
	before := dumpTables(t, tr)
	tr.Read(core.Rebuild)
	require.Equal(t, before, dumpTables(t, tr), "projections rebuilt from the log")
	return before
}

// dumpTables reads every projection table whole, ordered.
func dumpTables(t *testing.T, tr *treetest.Tree) map[string][][]any {
	out := map[string][][]any{}
	tr.Read(func(tx storage.Tx) error {
		for _, p := range core.ProjectionTables {
			r, err := tx.Query(`SELECT * FROM ` + p + ` ORDER BY 1`)
			require.NoError(t, err)
			out[p] = r.Values
		}
		return nil
	})
	return out
}

// A graceful stop (what eviction does) and a kill, one after the other,
// leave a question pending under the same id: neither records a
// cancellation or ends the turn, and the question is still answerable.
func TestQuestionSurvivesShutdownAndKill(t *testing.T) {
	c := newAskRun(t)
	n := c.boot(t)
	pid, q := c.parked(t, n)

	require.NoError(t, n.Inst.Close(ctx))
	n2 := c.boot(t)
	require.Len(t, questions(t, n2, c.sid), 1)
	n2.Crash()
	n3 := c.boot(t)
	again := questions(t, n3, c.sid)
	require.Len(t, again, 1)
	assert.Equal(t, q.ID, again[0].ID)

	evs := c.tr.Events(c.sid)
	assert.Empty(t, treetest.OfType(evs, event.QuestionCancelled), "no cancellation by a stop or a kill")
	assert.Empty(t, treetest.Terminals(evs))
	assert.Equal(t, "running", c.tr.PromptState(pid))

	_, err := n3.Inst.Reply(ctx, c.sid, q.ID, core.Reply{ResponseID: "r1", Answers: [][]string{{"red"}}})
	require.NoError(t, err)
	n3.Idle()
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// A question call whose arguments make no question settles as an error the
// model can read, without parking: nothing waits on it.
func TestBadQuestionSettlesWithoutWaiting(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall(tool.QuestionName, `{"questions":[{"question":"pick","choices":["a","a"]}]}`)}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), tool.QuestionTool()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "ask badly")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	evs := tr.Events(sid)
	assert.Empty(t, treetest.OfType(evs, event.StepParked))
	settled := treetest.OfType(evs, event.ToolSettled)
	require.Len(t, settled, 1)
	var s event.Settled
	require.NoError(t, settled[0].Decode(&s))
	assert.Equal(t, event.OutcomeError, s.Outcome)
	assert.Contains(t, s.Output, "repeated choice")
}

// Two question calls in one step park together in one event; the turn
// continues only once the last is answered, and cancelling one cancels the
// other and ends the turn.
func TestTwoQuestionsInOneStep(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			tr := treetest.New(t)
			m := &scriptModel{steps: func(k int) scriptStep {
				if k == 1 {
					return scriptStep{chunks: []model.Chunk{
						{ToolCall: &model.ToolCallDelta{Index: 0, Name: tool.QuestionName, Arguments: `{"questions":[{"question":"first?"}]}`}},
						{ToolCall: &model.ToolCallDelta{Index: 1, Name: tool.QuestionName, Arguments: `{"questions":[{"question":"second?"},{"question":"third?"}]}`}},
						{Finish: model.FinishToolCalls},
					}}
				}
				return scriptStep{chunks: text("thanks")}
			}}
			n := tr.Boot(newRunner(t, m, runner.NewConfig(), tool.QuestionTool()))
			sid := n.NewSession("s")
			pid := n.Admit(sid, "ask twice")
			n.Idle()
			parked := treetest.OfType(tr.Events(sid), event.StepParked)
			require.Len(t, parked, 1, "one atomic event for the step")
			var p event.Parked
			require.NoError(t, parked[0].Decode(&p))
			require.Len(t, p.Blockers, 2)
			qs := questions(t, n, sid)
			require.Len(t, qs, 2)

			if cancel {
				_, err := n.Inst.Reply(ctx, sid, qs[1].ID, core.Reply{ResponseID: "r1", Cancel: true})
				require.NoError(t, err)
				n.Idle()
				assert.Equal(t, "interrupted", tr.PromptState(pid))
				assert.Empty(t, questions(t, n, sid), "the sibling was cancelled")
				_, err = n.Inst.Reply(ctx, sid, qs[0].ID, core.Reply{ResponseID: "r2", Answers: [][]string{{"yes"}}})
				var conflict *core.ReplyConflict
				require.ErrorAs(t, err, &conflict)
				assert.Equal(t, event.CancelSibling, conflict.Winner.Reason)
				assert.Len(t, treetest.OfType(tr.Events(sid), event.QuestionCancelled), 2)
				assert.Equal(t, 1, m.Requests(1))
				return
			}
			_, err := n.Inst.Reply(ctx, sid, qs[0].ID, core.Reply{ResponseID: "r1", Answers: [][]string{{"yes"}}})
			require.NoError(t, err)
			n.Idle()
			assert.False(t, tr.Claim(sid).Exists, "one question still waits")
			assert.Equal(t, core.StatusWaiting, snapshotStatus(t, n, sid))
			_, err = n.Inst.Reply(ctx, sid, qs[1].ID, core.Reply{ResponseID: "r2", Answers: [][]string{{"maybe"}}})
			require.ErrorIs(t, err, core.ErrInvalid, "two questions need two answers")
			_, err = n.Inst.Reply(ctx, sid, qs[1].ID, core.Reply{ResponseID: "r2", Answers: [][]string{{"maybe"}, {"because"}}})
			require.NoError(t, err)
			n.Idle()
			assert.Equal(t, "succeeded", tr.PromptState(pid))
			assert.Equal(t, 1, m.Requests(1))
			assert.Equal(t, 1, m.Requests(3))
			assert.Contains(t, questionOutput(t, tr.Events(sid), qs[1].CallID), `"third?" → "because"`)
		})
	}
}

// A client hydrating from a snapshot and following the stream from its
// cursor reaches the pending set of a later snapshot: parked adds
// blockers, answered and cancelled remove one each.
func TestSnapshotAndStreamConverge(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, Name: tool.QuestionName, Arguments: `{"questions":[{"question":"one?"}]}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, Name: tool.QuestionName, Arguments: `{"questions":[{"question":"two?"}]}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), tool.QuestionTool()))
	sid := n.NewSession("s")
	follow := func(from core.Snapshot) map[string]bool {
		pending := map[string]bool{}
		for _, b := range from.Blockers {
			pending[b.ID] = true
		}
		evs, err := n.Inst.Events(ctx, sid, from.Cursor, 0)
		require.NoError(t, err)
		for _, e := range evs {
			switch e.Type {
			case event.StepParked:
				var p event.Parked
				require.NoError(t, e.Decode(&p))
				for _, b := range p.Blockers {
					pending[b.ID] = true
				}
			case event.QuestionAnswered, event.QuestionCancelled:
				var r event.Resolution
				require.NoError(t, e.Decode(&r))
				delete(pending, r.BlockerID)
			}
		}
		return pending
	}
	snapshot := func() (core.Snapshot, map[string]bool) {
		s, err := n.Inst.Snapshot(ctx, sid, 0, 50)
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, b := range s.Blockers {
			ids[b.ID] = true
		}
		return s, ids
	}
	s0, _ := snapshot()
	n.Admit(sid, "ask two")
	n.Idle()
	s1, pending1 := snapshot()
	require.Len(t, pending1, 2)
	assert.Equal(t, pending1, follow(s0))
	_, err := n.Inst.Reply(ctx, sid, s1.Blockers[0].ID, core.Reply{ResponseID: "r", Answers: [][]string{{"yes"}}})
	require.NoError(t, err)
	n.Idle()
	_, pending2 := snapshot()
	require.Len(t, pending2, 1)
	assert.Equal(t, pending2, follow(s1))
	assert.Equal(t, pending2, follow(s0))
	_, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	_, pending3 := snapshot()
	assert.Empty(t, pending3)
	assert.Equal(t, pending3, follow(s1))
}

// A reply whose commit is reported failed although it was durable (a late
// IOERR), or that meets a full disk for 10 s, is one answer: the rerun
// recognises its own commit instead of losing to itself with a 409.
func TestReplyThroughStorageFaults(t *testing.T) {
	for _, fault := range []string{"late-ioerr", "full-10s"} {
		t.Run(fault, func(t *testing.T) {
			c := newAskRun(t)
			f := c.tr.Faults()
			n := c.boot(t)
			pid, q := c.parked(t, n)

			if fault == "late-ioerr" {
				f.FailLateCommits(1, faultvfs.IOErrFsync)
			} else {
				f.FailFor(10*time.Second, faultvfs.Full)
			}
			var (
				res core.Resolution
				err error
			)
			waits := c.tr.Drive(func() {
				res, err = n.Inst.Reply(ctx, c.sid, q.ID, core.Reply{ResponseID: "r1", Answers: [][]string{{"red"}}})
			})
			require.NoError(t, err)
			assert.NotEmpty(t, waits, "the reply met the fault")
			assert.Equal(t, core.BlockerAnswered, res.State)
			assert.False(t, res.Duplicate)
			n.IdleDriving()

			evs := c.tr.Events(c.sid)
			assert.Len(t, treetest.OfType(evs, event.QuestionAnswered), 1)
			assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
			assert.Equal(t, "succeeded", c.tr.PromptState(pid))
		})
	}
}

// A turn ended by a cancelled question leaves the question call without a
// result. The next turn's request still answers every tool call of the
// transcript (providers refuse an assistant tool call with no tool message
// after it), telling the model the question was cancelled.
func TestCancelledCallHasAResultInTheNextRequest(t *testing.T) {
	c := newAskRun(t)
	n := c.boot(t)
	_, q := c.parked(t, n)
	_, err := n.Inst.Reply(ctx, c.sid, q.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true})
	require.NoError(t, err)
	n.Idle()

	_, err = c.admit(n, "p2", "try again")
	require.NoError(t, err)
	n.Idle()

	c.m.mu.Lock()
	msgs := c.m.lastReq.Messages
	c.m.mu.Unlock()
	results := map[string]string{}
	var calls []model.ToolCall
	for _, m := range msgs {
		calls = append(calls, m.ToolCalls...)
		if m.Role == model.RoleTool {
			results[m.ToolCallID] = m.Text
		}
	}
	require.Len(t, calls, 2, "the first turn's answer called two tools")
	for _, call := range calls {
		assert.Contains(t, results, call.ID, "call %s (%s) has a tool message", call.ID, call.Name)
		if call.Name == tool.QuestionName {
			assert.Equal(t, "The user cancelled this question instead of answering it, which ended the turn.", results[call.ID])
		}
	}
}

// A reply's message is bounded like a permission reply's: a longer one is
// refused as invalid, and the question stays pending.
func TestQuestionReplyMessageIsBounded(t *testing.T) {
	c := newAskRun(t)
	n := c.boot(t)
	_, q := c.parked(t, n)
	long := strings.Repeat("m", core.MaxReplyMessage+1)
	for _, r := range []core.Reply{
		{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true, Message: long},
		{Kind: event.KindQuestion, ResponseID: "r2", Answers: [][]string{{"green"}}, Message: long},
	} {
		_, err := n.Inst.Reply(ctx, c.sid, q.ID, r)
		assert.ErrorIs(t, err, core.ErrInvalid)
	}
	assert.Len(t, questions(t, n, c.sid), 1, "still pending")
}
