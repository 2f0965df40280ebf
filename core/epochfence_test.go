package core_test

// The epoch fence (DESIGN §6.2, §14): once a newer instance has booted the
// tree, every write an older instance still attempts is refused with
// ErrFenced and leaves nothing behind. Each test here makes one kind of
// write from the superseded instance A after B booted the same tree, and
// checks that the whole database is as it was, then that B's work
// proceeds. B boots without sweeping (openUnswept) so that nothing but the
// epoch tells A it is superseded: the claims A's executions hold still
// name them, which the claim fence alone would let through. Every write of
// core goes through write.attempt's checkFence; these tests pin it at each
// site that makes one.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// dumpTree reads every row of every table on a plain connection, in a
// stable order: two dumps are equal only if no write landed between them.
func dumpTree(t *testing.T, tr *treetest.Tree) string {
	t.Helper()
	var b strings.Builder
	tr.Read(func(tx storage.Tx) error {
		tables, err := tx.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		if err != nil {
			return err
		}
		for tables.Next() {
			var name string
			if err := tables.Scan(&name); err != nil {
				return err
			}
			rows, err := tx.Query(`SELECT * FROM "` + name + `"`)
			if err != nil {
				return err
			}
			lines := make([]string, 0, rows.Len())
			for _, row := range rows.Values {
				cells := make([]string, len(row))
				for i, v := range row {
					switch v := v.(type) {
					case string, []byte:
						cells[i] = fmt.Sprintf("%q", v)
					default:
						cells[i] = fmt.Sprint(v)
					}
				}
				lines = append(lines, "  "+strings.Join(cells, " "))
			}
			sort.Strings(lines)
			fmt.Fprintf(&b, "%s %v\n%s\n", name, rows.Columns, strings.Join(lines, "\n"))
		}
		return nil
	})
	return b.String()
}

// supersede opens B on tr, taking a new epoch, without a sweep.
func supersede(t *testing.T, tr *treetest.Tree, a *core.Instance, d core.Driver) *core.Instance {
	t.Helper()
	b := openUnswept(t, tr, d)
	require.Greater(t, b.Epoch(), a.Epoch(), "B took a newer epoch")
	return b
}

// crashedClaim leaves session "s" with a claim that runs nowhere: its turn
// ("hold") started on an instance that then died. It returns the prompt id.
func crashedClaim(t *testing.T, tr *treetest.Tree) string {
	t.Helper()
	d := treetest.NewDriver(1)
	n0 := tr.Boot(d)
	n0.NewSession("s")
	pid := n0.Admit("s", "hold")
	<-d.Started
	n0.Crash()
	require.True(t, tr.Claim("s").Exists)
	return pid
}

// gateDriver announces each run on started and, once release is closed,
// ends it as end says; a run cancelled before that stops.
type gateDriver struct {
	started chan *core.Execution
	release chan struct{}
	end     func(ctx context.Context, x *core.Execution) core.Outcome
}

func newGate(end func(ctx context.Context, x *core.Execution) core.Outcome) gateDriver {
	return gateDriver{started: make(chan *core.Execution, 4), release: make(chan struct{}), end: end}
}

func (d gateDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	select {
	case <-d.release:
	case <-ctx.Done():
		return core.Outcome{Kind: core.Stopped}
	}
	return d.end(ctx, x)
}

// resumeOn sweeps b, which resumes the turn of "s" with d (answering at
// once), and checks it ends succeeded with one terminal in the log.
func resumeOn(t *testing.T, tr *treetest.Tree, b *core.Instance, pid string) {
	t.Helper()
	rep, err := recovery.Sweep(ctx, b)
	require.NoError(t, err)
	require.Len(t, rep.Decisions, 1)
	require.NoError(t, b.WaitIdle(ctx))
	assert.Equal(t, "succeeded", tr.PromptState(pid), "B's resume ran the turn to its end")
	assert.Len(t, treetest.Terminals(tr.Events("s")), 1)
	assert.False(t, tr.Claim("s").Exists)
}

// CreateSession (session.go).
func TestSupersededInstanceCannotCreateASession(t *testing.T) {
	tr := treetest.New(t)
	a := tr.Boot(treetest.NewDriver(1))
	b := supersede(t, tr, a.Inst, treetest.NewDriver(1))
	before := dumpTree(t, tr)

	_, err := a.Inst.CreateSession(ctx, core.NewSession{ID: "late", Principal: "tester"})
	require.ErrorIs(t, err, core.ErrFenced)
	assert.Equal(t, before, dumpTree(t, tr), "the refused write left nothing")

	_, err = b.CreateSession(ctx, core.NewSession{ID: "late", Principal: "tester"})
	require.NoError(t, err, "B creates the session A could not")
}

// Admit (prompt.go): the admission, its claim and its start.
func TestSupersededInstanceCannotAdmitAPrompt(t *testing.T) {
	tr := treetest.New(t)
	ad := treetest.NewDriver(1)
	a := tr.Boot(ad)
	a.NewSession("s")
	bd := treetest.NewDriver(1)
	b := supersede(t, tr, a.Inst, bd)
	before := dumpTree(t, tr)

	_, err := a.Inst.Admit(ctx, "s", core.PromptInput{Text: "go"})
	require.ErrorIs(t, err, core.ErrFenced)
	assert.Equal(t, before, dumpTree(t, tr), "no prompt, no claim")
	assert.Zero(t, ad.Runs(), "nothing started on A")

	ab, err := b.Admit(ctx, "s", core.PromptInput{Text: "go"})
	require.NoError(t, err)
	require.NoError(t, b.WaitIdle(ctx))
	assert.Equal(t, "succeeded", tr.PromptState(ab.PromptID), "B admits and runs the turn")
}

// startLocked (prompt.go): starting a claimed turn, as after a reply's or
// an admission's commit.
func TestSupersededInstanceCannotStartAClaimedTurn(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(1)
	n0 := tr.Boot(d)
	n0.NewSession("s")
	// The admission commits and its instance dies before the start.
	n0.Kill.KillAt(1, true)
	_, _ = n0.Inst.Admit(ctx, "s", core.PromptInput{Text: "go"})
	<-n0.Kill.Died()
	n0.Crash()
	require.True(t, tr.Claim("s").Exists)
	require.Empty(t, tr.Claim("s").ExecutionID, "no execution started")

	ad, bd := treetest.NewDriver(1), treetest.NewDriver(1)
	a := openUnswept(t, tr, ad)
	b := supersede(t, tr, a, bd)
	before := dumpTree(t, tr)

	a.StartForTest(ctx, "s", event.CausePrompt)
	require.NoError(t, a.WaitIdle(ctx))
	assert.Equal(t, before, dumpTree(t, tr), "no execution.started, the claim names none")
	assert.False(t, a.RunningHere("s"))
	assert.Zero(t, ad.Runs(), "nothing ran on A")

	b.StartForTest(ctx, "s", event.CausePrompt)
	require.NoError(t, b.WaitIdle(ctx))
	assert.Equal(t, 1, bd.Runs(), "B starts the turn")
	assert.Len(t, treetest.Terminals(tr.Events("s")), 1)
	assert.False(t, tr.Claim("s").Exists)
}

// Reply (blocker.go): answering a question or a permission request, which
// resolves the blocker, takes the claim and starts the continuation.
func TestSupersededInstanceCannotAnswerABlocker(t *testing.T) {
	for _, c := range []struct {
		name, kinds string
		reply       core.Reply
	}{
		{"question", "q", core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}},
		{"permission", "p", core.Reply{Kind: event.KindPermission, ResponseID: "r1", Decision: core.ReplyOnce}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := parkOn(t, c.kinds)
			require.Len(t, p.blockers, 1)
			bd := parkDriver{started: make(chan *core.Execution, 4)}
			b := supersede(t, p.tr, p.n.Inst, bd)
			before := dumpTree(t, p.tr)

			_, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, c.reply)
			require.ErrorIs(t, err, core.ErrFenced)
			assert.Equal(t, before, dumpTree(t, p.tr), "the blocker is still pending, nothing claimed")
			select {
			case x := <-p.d.started:
				t.Fatalf("A started %s", x.ID())
			default:
			}

			res, err := b.Reply(ctx, "s", p.blockers[0].ID, c.reply)
			require.NoError(t, err)
			assert.False(t, res.Duplicate, "B's reply is the first")
			within(t, bd.started, "B's continuation after its reply")
			require.NoError(t, b.WaitIdle(ctx))
			assert.Equal(t, "succeeded", p.tr.PromptState(p.pid), "B's reply continued the turn")
		})
	}
}

// interruptDirect (interrupt.go): an interrupt of a turn that runs nowhere
// here, committed without an execution's help.
func TestSupersededInstanceCannotCommitAnInterrupt(t *testing.T) {
	tr := treetest.New(t)
	pid := crashedClaim(t, tr)
	a := openUnswept(t, tr, treetest.NewDriver(1))
	b := supersede(t, tr, a, treetest.NewDriver(1))
	before := dumpTree(t, tr)

	did, err := a.Interrupt(ctx, "s", event.ReasonUser)
	require.ErrorIs(t, err, core.ErrFenced)
	assert.False(t, did)
	assert.Equal(t, before, dumpTree(t, tr), "the turn and its claim are as they were")

	did, err = b.Interrupt(ctx, "s", event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid), "B interrupts the turn")
	assert.False(t, tr.Claim("s").Exists)
}

// finish (execution.go) for an interrupt: an execution running on A, told
// to stop by A's interrupt, cannot record interrupted{user}, nor can A
// commit it directly once it stopped (interruptDirect).
func TestSupersededInstanceCannotSettleAnInterruptOfItsExecution(t *testing.T) {
	tr := treetest.New(t)
	ad := treetest.NewDriver(1)
	a := tr.Boot(ad)
	a.NewSession("s")
	pid := a.Admit("s", "hold")
	x := <-ad.Started
	b := supersede(t, tr, a.Inst, treetest.NewDriver(1))
	before := dumpTree(t, tr)

	did, err := a.Inst.Interrupt(ctx, "s", event.ReasonUser)
	require.ErrorIs(t, err, core.ErrFenced)
	assert.False(t, did)
	<-x.Cancelled()
	require.NoError(t, a.Inst.WaitIdle(ctx))
	assert.Equal(t, before, dumpTree(t, tr), "no interrupted record, the claim still names A's execution")

	rep, err := recovery.Sweep(ctx, b)
	require.NoError(t, err)
	require.Len(t, rep.Decisions, 1, "B resumes the turn A could not settle")
	did, err = b.Interrupt(ctx, "s", event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	assert.Len(t, treetest.Terminals(tr.Events("s")), 1)
}

// Recover (recover.go): the sweep's decision on a claim running nowhere
// (resume, abort, owed failure) and the execution it starts.
func TestSupersededInstanceCannotSweep(t *testing.T) {
	tr := treetest.New(t)
	pid := crashedClaim(t, tr)
	ad, bd := treetest.NewDriver(1), treetest.NewDriver(1)
	a := openUnswept(t, tr, ad)
	b := supersede(t, tr, a, bd)
	before := dumpTree(t, tr)

	rep, err := recovery.Sweep(ctx, a)
	require.ErrorIs(t, err, core.ErrFenced)
	assert.Empty(t, rep.Decisions)
	require.NoError(t, a.WaitIdle(ctx))
	assert.Equal(t, before, dumpTree(t, tr), "no resume counted, no execution started")
	assert.Zero(t, ad.Runs(), "nothing ran on A")

	bd.Release()
	resumeOn(t, tr, b, pid)
	assert.Equal(t, 1, bd.Runs())
}

// Append and AppendFunc (execution.go): every durable event an execution
// writes while it runs (steps, text checkpoints, tool phases, progress).
func TestSupersededInstanceExecutionCannotAppend(t *testing.T) {
	tr := treetest.New(t)
	ad := treetest.NewDriver(1)
	a := tr.Boot(ad)
	a.NewSession("s")
	pid := a.Admit("s", "hold")
	x := <-ad.Started
	step := x.ID() + ".step"
	_, err := x.Append(ctx, false, core.NewEvent{Type: event.StepStarted, Payload: event.StepBegun{StepID: step, ExecutionID: x.ID(), PromptID: pid, Index: 1}})
	require.NoError(t, err, "A's step began before B booted")
	bd := treetest.NewDriver(1)
	b := supersede(t, tr, a.Inst, bd)
	before := dumpTree(t, tr)

	_, err = x.Append(ctx, true, core.NewEvent{Type: event.TextCheckpoint, Payload: event.Checkpoint{StepID: step, Text: "late"}})
	require.ErrorIs(t, err, core.ErrFenced)
	_, err = x.AppendFunc(ctx, false, func(storage.Tx) ([]core.NewEvent, error) {
		return []core.NewEvent{{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "late"}}}, nil
	})
	require.ErrorIs(t, err, core.ErrFenced)
	assert.Equal(t, before, dumpTree(t, tr), "nothing appended")

	bd.Release()
	resumeOn(t, tr, b, pid)
	ad.Release() // A's body answers, fenced
	require.NoError(t, a.Inst.WaitIdle(ctx))
	assert.Len(t, treetest.Terminals(tr.Events("s")), 1, "B's terminal only")
}

// finish (execution.go): the record of how an execution ended, whichever
// way it ended, and the shutdown record a graceful stop writes.
func TestSupersededInstanceCannotRecordHowItsExecutionEnded(t *testing.T) {
	park := func(x *core.Execution) *event.Parked {
		call := x.ID() + ".call0"
		return &event.Parked{StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(), Blockers: []event.Blocker{{
			ID: core.BlockerID("q", call, 0), Kind: event.KindQuestion, CallID: call, Adapter: tool.QuestionAdapter,
			Request: json.RawMessage(`{"questions":[{"question":"which colour?","choices":["red","green"]}]}`)}}}
	}
	for _, c := range []struct {
		name string
		out  func(x *core.Execution) core.Outcome
	}{
		{"succeeded", func(*core.Execution) core.Outcome { return core.Outcome{Kind: core.Succeeded} }},
		{"failed", func(*core.Execution) core.Outcome {
			return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: "scripted"}
		}},
		{"retry later", func(x *core.Execution) core.Outcome {
			return core.Outcome{Kind: core.RetryLater, RetryAt: x.Clock().Now() + 60_000, Message: "overloaded", Attempt: 1}
		}},
		{"parked", func(x *core.Execution) core.Outcome { return core.Outcome{Kind: core.Parked, Park: park(x)} }},
		{"shutdown", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := treetest.New(t)
			ad := newGate(func(_ context.Context, x *core.Execution) core.Outcome { return c.out(x) })
			a := tr.Boot(ad)
			a.NewSession("s")
			pid := a.Admit("s", "go")
			x := <-ad.started
			bd := treetest.NewDriver(1)
			b := supersede(t, tr, a.Inst, bd)
			before := dumpTree(t, tr)

			if c.out == nil {
				require.NoError(t, a.Inst.Close(ctx), "a graceful stop")
			} else {
				close(ad.release)
				require.NoError(t, a.Inst.WaitIdle(ctx))
			}
			assert.Equal(t, before, dumpTree(t, tr), "no record of the end, the claim still names A's execution")
			assert.Equal(t, x.ID(), tr.Claim("s").ExecutionID)

			resumeOn(t, tr, b, pid)
			assert.Equal(t, 1, bd.Runs())
		})
	}
}

// failStorage (execution.go): the failed{type:"storage"} that ends a turn
// whose writes storage refused, written on the settlement schedule. B
// boots on a healthy connection while A waits for storage.
func TestSupersededInstanceCannotFailATurnForStorage(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	ad := newGate(func(context.Context, *core.Execution) core.Outcome { return core.Outcome{Kind: core.Succeeded} })
	a := tr.Boot(ad)
	a.NewSession("s")
	pid := a.Admit("s", "go")
	<-ad.started

	f.FailFor(24*time.Hour, faultvfs.Full)
	bd := treetest.NewDriver(1)
	var b *core.Instance
	var before string
	var idleErr error
	waits := tr.DriveEach(func() {
		close(ad.release)
		idleErr = a.Inst.WaitIdle(ctx)
	}, func(w retry.Wait) {
		if b != nil || w.Policy != retry.Settlement().Name {
			return
		}
		// The terminal spent its write schedule; failStorage waits.
		faulty := tr.DB
		tr.DB.VFS = "" // B's connection is healthy
		b = supersede(t, tr, a.Inst, bd)
		tr.DB = faulty
		f.Heal()
		before = dumpTree(t, tr)
	})
	require.NoError(t, idleErr)
	require.NotNil(t, b, "failStorage waited for storage: %v", policies(waits))
	assert.Equal(t, before, dumpTree(t, tr), "no failed{storage}, the claim still names A's execution")
	assert.Equal(t, "running", tr.PromptState(pid))

	resumeOn(t, tr, b, pid)
}

// StartChild (job.go): a task call's child session, its job and its claim.
func TestSupersededInstanceExecutionCannotStartAChild(t *testing.T) {
	tr := treetest.New(t)
	childErr := make(chan error, 1)
	ad := newGate(func(ctx context.Context, x *core.Execution) core.Outcome {
		_, err := x.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "work", MaxDepth: 1, MaxChildren: core.DefaultMaxSubagents})
		childErr <- err
		return core.Outcome{Kind: core.Stopped}
	})
	a := tr.Boot(ad)
	a.NewSession("s")
	pid := a.Admit("s", "go")
	<-ad.started
	bd := treetest.NewDriver(1)
	b := supersede(t, tr, a.Inst, bd)
	before := dumpTree(t, tr)

	close(ad.release)
	require.ErrorIs(t, <-childErr, core.ErrFenced)
	require.NoError(t, a.Inst.WaitIdle(ctx))
	assert.Equal(t, before, dumpTree(t, tr), "no child session, no job")

	resumeOn(t, tr, b, pid)
}
