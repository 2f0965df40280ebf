package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
)

// Causes an execution's context is cancelled with; context.Cause tells a
// driver which one stopped it.
var (
	ErrInterrupted = errors.New("interrupted by the user")
	ErrSuperseded  = errors.New("superseded by a replacing prompt")
	// errTaskEnded stops a child's task turn whose job ended with its
	// parent's turn (interruptTask): an interrupt of that turn alone.
	errTaskEnded = fmt.Errorf("%w: its parent's turn ended", ErrInterrupted)
	ErrShutdown  = errors.New("host shutting down")
	errAbandoned = errors.New("instance abandoned")
)

// Driver runs the work of a turn. The turn runner (model steps and tools) is
// the real one; tests use small scripted drivers.
type Driver interface {
	// Run drives one execution until the turn ends, the execution must stop
	// (ctx is cancelled; context.Cause says why), or a write fails with
	// ErrFenced. Every durable write goes through x.Append. The outcome is
	// ignored when ctx was cancelled: the stop reason decides then.
	Run(ctx context.Context, x *Execution) Outcome
}

// DriverFunc adapts a function to Driver.
type DriverFunc func(ctx context.Context, x *Execution) Outcome

// Run implements Driver.
func (f DriverFunc) Run(ctx context.Context, x *Execution) Outcome { return f(ctx, x) }

// OutcomeKind says how an execution ended.
type OutcomeKind int

const (
	// Succeeded ends the turn with session.execution.succeeded.
	Succeeded OutcomeKind = iota
	// Failed ends the turn with session.execution.failed{FailType, Message}.
	Failed
	// Stopped ends the execution without a terminal: it was fenced or could
	// not write. The claim, if still held, is left for recovery.
	Stopped
	// RetryLater ends the execution without ending the turn: the turn sleeps
	// until RetryAt (session.retry.scheduled), keeping its claim, and
	// recovery starts it again then without counting a resume.
	RetryLater
	// Parked ends the execution without ending the turn: the step's calls
	// wait for people (DESIGN §9). Park, if set, is appended with the
	// claim's release in one transaction; the session is then waiting, and
	// a reply that resolves the step's last blocker claims it again.
	Parked
)

// Outcome is what a driver reports when Run returns.
type Outcome struct {
	Kind     OutcomeKind
	FailType string        // Failed
	Message  string        // Failed; RetryLater: the reason
	RetryAt  int64         // RetryLater: ms
	Attempt  int           // RetryLater: 1 for the step's first retry
	Park     *event.Parked // Parked: the blockers to record (nil: already recorded)
}

// Execution is one busy period of a turn in this instance.
type Execution struct {
	inst      *Instance
	id        string
	sessionID string
	promptID  string
	prompt    string
	cause     string
	attempt   int

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the drain has finished with it
	once   sync.Once

	mu sync.Mutex
	// lost is the storage failure that ended one of the execution's writes
	// (its write schedule spent): the turn then ends failed{type:"storage"},
	// and later writes of the execution fail at once with the same error.
	lost error
	// cuts are the step cuts the driver appended that storage refused (by
	// step id): what it received of a stream it stopped. The turn's
	// terminal writes them for those steps, not the checkpointed text, so
	// a turn that fails on storage keeps everything received (docs/api.md).
	cuts map[string]event.Cut

	// asking counts the interrupt requests waiting for x to stop, and
	// givenUpAt is the session's last event seq when the latest one that
	// gave up answered its error (0 while none could read it): see
	// interruptCutoff.
	asking    int
	gaveUp    bool
	givenUpAt int64

	// failed: finish recorded the turn's end as failed (read by drain,
	// after finish, on the same goroutine). lateInterrupt: it recorded an
	// interrupt no request waited for, so drain stops the turn's children.
	failed, lateInterrupt bool
	// startWanted: a start of x's session (startLocked) found x registered
	// here and so started nothing. startLocked is how whatever takes a
	// claim starts it, and the one place a claim is left unstarted because
	// an execution runs here. x is gone only once unregistered, so whoever
	// unregisters x starts the session's claim when this is set (startLocked
	// does nothing if no claim waits or the claim names an execution):
	// drain, when finish left no next execution (after a handover the claim
	// names the next one), and an interrupt whose direct commit forgot x
	// (x's body may never return). Guarded by claimMu: set while x is
	// registered and read once it is not, so the read sees every start that
	// found x, whenever in x's life its claim was taken: during a wait for
	// storage of x's record or of an interrupt's direct commit, or before
	// x's record began (an admission in the interrupt's wait, x's body
	// returning after it), which a count of the lock's releases across one
	// of those waits would miss.
	startWanted bool
	// recordBegun: a write that ends x's turn (finish's record, or an
	// interrupt's direct commit with x) has run an attempt. Its commit
	// may then already be stored (durable though reported failed, the
	// write waiting to rerun with the claim lock let go) while x is still
	// registered, and older than a prompt admitted in that wait: an
	// interrupt request that tells x to stop after this is set cannot take
	// that record's seq as its own cutoff (interruptSettled). Guarded by
	// claimMu, as both writes run their attempts under it.
	recordBegun bool
}

// interruptAsked notes an interrupt request that has told x to stop and
// waits for it; the request calls the returned func when it answers, with
// whether it gave up and, if so, the session's last event seq by then (0:
// unknown).
func (x *Execution) interruptAsked() func(gaveUp bool, upTo int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.asking++
	return func(gaveUp bool, upTo int64) {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.asking--
		if gaveUp {
			x.gaveUp, x.givenUpAt = true, max(x.givenUpAt, upTo)
		}
	}
}

// interruptCutoff is how far back x's record of its interrupt cancels the
// queue (interruptQueue): wholeQueue (every queued prompt) while a request
// waits for the record, as that request answers only after it; else,
// when every request that told x to stop has given up (storage refused
// the interrupt, or the instance is stopping), the session's last seq
// when the latest of them answered. The execution cannot be told to go
// on, so its turn still ends interrupted once storage takes the record,
// but a prompt admitted after those answers (a client's next prompt, sent
// after its interrupt's 503) stays queued, to run next. Where no request
// could read that seq the cutoff is 0 and the record cancels no prompt:
// it cannot tell those sent before the answers from those sent after.
// unanswered reports that no request waits for the record.
func (x *Execution) interruptCutoff() (upTo int64, unanswered bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.asking > 0 || !x.gaveUp {
		return wholeQueue, false
	}
	return x.givenUpAt, true
}

// storageLost returns the storage failure that ended one of x's writes.
func (x *Execution) storageLost() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lost
}

func (x *Execution) loseStorage(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.lost == nil {
		x.lost = err
	}
}

// ID is the execution id carried on the claim.
func (x *Execution) ID() string { return x.id }

// SessionID is the session the execution belongs to.
func (x *Execution) SessionID() string { return x.sessionID }

// PromptID is the prompt whose turn this is.
func (x *Execution) PromptID() string { return x.promptID }

// Prompt is the prompt's text.
func (x *Execution) Prompt() string { return x.prompt }

// Cause is why the execution started (event.CausePrompt, CauseResume, …).
func (x *Execution) Cause() string { return x.cause }

// Attempt is the claim's resume count when the execution started (0 unless
// it is a resume).
func (x *Execution) Attempt() int { return x.attempt }

// Clock is the host clock, for timers that must follow virtual time.
func (x *Execution) Clock() Clock { return x.inst.host.Clock }

// NewID mints an id. A driver mints the ids of what it is about to write
// before calling Append, so a retried write reuses them.
func (x *Execution) NewID() string { return x.inst.host.IDs.NewID() }

// Read runs fn in a transaction for reading the tree's state. It is not
// fenced: what a driver decides from it is written through Append, which is.
// A transient storage failure is retried on the write schedule, like an
// append; fn may run more than once. ctx ending stops the waiting.
func (x *Execution) Read(ctx context.Context, fn func(storage.Tx) error) error {
	if err := x.storageLost(); err != nil {
		return err
	}
	err := x.inst.read(ctx, fn)
	if isStorageFailure(err) {
		x.loseStorage(err)
	}
	return err
}

// Log is the instance's logger with the execution's ids.
func (x *Execution) Log() *logs.Logger {
	return x.inst.log.With("session", x.sessionID, "execution", x.id, "prompt", x.promptID)
}

// NewEvent is an event a driver asks to append.
type NewEvent struct {
	Type    event.Type
	Payload any
}

// Append commits events to the execution's session in one fenced
// transaction: it fails with ErrFenced, writing nothing, once the claim no
// longer names this execution or a newer instance booted. progress marks
// work a resume must not redo (DESIGN §6.6) and resets the resume count in
// the same transaction.
//
// A transient storage failure reruns the whole transaction, with the same
// event ids, on the write schedule (up to 30 s); ctx ending stops the
// waiting, never a transaction. Past the schedule Append fails with
// ErrStorageUnavailable and the execution has lost storage: every later
// Append fails the same way at once, and when the driver returns the turn
// ends failed{type:"storage"} as soon as storage takes that write.
func (x *Execution) Append(ctx context.Context, progress bool, evs ...NewEvent) ([]event.Event, error) {
	out, err := x.AppendFunc(ctx, progress, func(storage.Tx) ([]NewEvent, error) { return evs, nil })
	if err != nil && isStorageFailure(err) {
		x.keepCuts(evs)
	}
	return out, err
}

// keepCuts remembers the step cuts among evs, which storage refused, for
// the turn's terminal to write (Execution.cuts).
func (x *Execution) keepCuts(evs []NewEvent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range evs {
		if c, ok := e.Payload.(event.Cut); ok && e.Type == event.StepCut {
			if x.cuts == nil {
				x.cuts = map[string]event.Cut{}
			}
			x.cuts[c.StepID] = c
		}
	}
}

// keptCuts returns the step cuts storage refused (keepCuts).
func (x *Execution) keptCuts() map[string]event.Cut {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.cuts)
}

// AppendFunc is Append with the events computed inside the fenced
// transaction from what it reads, so a decision and its record commit
// together (a tool whose effect lives in the tree's database). fn may run
// more than once if the transaction is retried; it must not have effects
// outside tx.
func (x *Execution) AppendFunc(ctx context.Context, progress bool, fn func(tx storage.Tx) ([]NewEvent, error)) ([]event.Event, error) {
	if err := x.storageLost(); err != nil {
		return nil, fmt.Errorf("append for execution %s: %w", x.id, err)
	}
	w := x.inst.newWrite()
	w.fence = &fence{sessionID: x.sessionID, executionID: x.id}
	var out []event.Event
	err := w.run(ctx, func(t *txw) error {
		out = out[:0]
		evs, err := fn(t.Tx)
		if err != nil {
			return err
		}
		for _, e := range evs {
			ev, err := t.append(x.sessionID, e.Type, e.Payload)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		if progress {
			return t.claims().resetAttempts(x.sessionID)
		}
		return nil
	})
	if err != nil {
		if isStorageFailure(err) {
			x.loseStorage(err)
		}
		return nil, fmt.Errorf("append for execution %s: %w", x.id, err)
	}
	return out, nil
}

// Emit publishes an ephemeral event (a text delta) to the session's live
// subscribers. Nothing is stored; a client that misses it re-reads durable
// state instead.
func (x *Execution) Emit(typ event.Type, payload any) {
	data, err := json.Marshal(payload)
	if err != nil {
		x.Log().Warn("encode ephemeral event", "type", typ, "err", err)
		return
	}
	x.inst.publish([]event.Event{{SessionID: x.sessionID, Type: typ, At: x.inst.host.Clock.Now(), Data: data}})
}

// plan is an execution decided inside a transaction, started after commit.
type plan struct {
	id, sessionID, promptID, prompt, cause string
	attempt                                int
}

// beginExecution starts the session's next execution inside t: the turn of
// the prompt already running, else of the oldest queued prompt. With no
// prompt left it releases the claim and returns nil. A new turn takes the
// claim afresh: resume count zero, claimed_at now.
func (t *txw) beginExecution(sessionID, cause string) (*plan, error) {
	rows, err := t.Query(`SELECT id, text, state FROM prompts WHERE session_id = ?1 AND state IN (?2, ?3)
		ORDER BY state = ?2 DESC, admitted_seq LIMIT 1`, sessionID, string(PromptRunning), string(PromptQueued))
	if err != nil {
		return nil, fmt.Errorf("begin execution: pick prompt: %w", err)
	}
	if !rows.Next() {
		return nil, t.claims().release(sessionID)
	}
	p := &plan{sessionID: sessionID, cause: cause}
	var state string
	if err := rows.Scan(&p.promptID, &p.prompt, &state); err != nil {
		return nil, fmt.Errorf("begin execution: %w", err)
	}
	turnStart := PromptState(state) == PromptQueued
	switch {
	case turnStart:
		p.cause = event.CausePrompt
	case p.cause == event.CausePrompt:
		// A caller that starts whatever is next (a prompt's admission, an
		// interrupt's sweep of descendants) met a running turn whose
		// claim names no execution: it was parked and then resolved, and
		// the reply's own start did not run (its storage failing, or a
		// kill). It goes on as the reply would have started it.
		p.cause = event.CauseResolution
	}
	// A child's task turn goes on only while its job is live. A reply (or a
	// resolution) hands the child its claim in one transaction and starts
	// it in another; a parent's interrupt can commit in between (a storage
	// wait lets go of the claim lock) and end the job, leaving the child's
	// turn to interruptChildren, which finds nothing running yet. Ended
	// here, as the sweep would end it, the turn never asks the model again
	// for nobody, and the claim goes on to a prompt of the child's own.
	if reason, ended, err := t.endedJobReason(sessionID, p.promptID); err != nil || ended {
		if err != nil {
			return nil, err
		}
		return t.endTaskTurn(sessionID, interruption("", p.promptID, reason, event.CutInterrupted, nil), reason, true)
	}
	p.id = t.id()
	if _, err := t.append(sessionID, event.ExecutionStarted, event.Started{ExecutionID: p.id, PromptID: p.promptID, Cause: p.cause, TurnStart: turnStart}); err != nil {
		return nil, err
	}
	if turnStart {
		if _, err := t.append(sessionID, event.MessageAdded, event.Message{MessageID: t.id(), PromptID: p.promptID, Role: event.RoleUser, Text: p.prompt}); err != nil {
			return nil, err
		}
		err = t.claims().startTurn(sessionID, p.id, t.now())
	} else {
		err = t.claims().attach(sessionID, p.id)
	}
	if err != nil {
		return nil, fmt.Errorf("begin execution: %w", err)
	}
	if err := t.claims().attempts(sessionID, &p.attempt); err != nil {
		return nil, fmt.Errorf("begin execution: %w", err)
	}
	return p, nil
}

// scheduleRetry records the retry and puts its time on the claim. The claim
// keeps its execution id: recovery sees retry_at and sleeps, then starts a
// new execution without counting a resume.
func (t *txw) scheduleRetry(x *Execution, out Outcome) error {
	if _, err := t.append(x.sessionID, event.RetryScheduled, event.Retry{ExecutionID: x.id, PromptID: x.promptID, At: out.RetryAt, Attempt: out.Attempt, Reason: out.Message}); err != nil {
		return err
	}
	return t.claims().sleepUntil(x.sessionID, out.RetryAt)
}

// park records the step's blockers and releases the claim in one
// transaction: a kill can never leave the blockers recorded and the claim
// held (which a resume would count), nor the claim released without them.
// Queued prompts stay queued and unclaimed: the parked turn is not over.
//
// A step whose blockers are all resolved by the time the park commits (a
// child whose turn had ended, a reply that came while this execution still
// held the claim) is not parked: the turn continues at once with cause
// resolution, here if startNext, else by the next sweep.
//
// A child whose job ended while the step ran is interrupted instead
// (endedJobReason, job.go): nothing would interrupt it once parked.
func (t *txw) park(x *Execution, p *event.Parked, startNext bool) (*plan, error) {
	if p != nil {
		if _, err := t.append(x.sessionID, event.StepParked, *p); err != nil {
			return nil, err
		}
		if err := t.resolveEndedTasks(x.sessionID, p); err != nil { // taskwait.go
			return nil, err
		}
	}
	// A child whose job ended while this step ran (its parent's turn was
	// interrupted after the step completed) is not waited for any more:
	// its turn ends here, as the parent's terminal ends a child parked
	// before it (job.go), rather than wait or continue for nobody.
	if reason, ended, err := t.endedJobReason(x.sessionID, x.promptID); err != nil || ended {
		if err != nil {
			return nil, err
		}
		return t.endTaskTurn(x.sessionID, interruption(x.id, x.promptID, reason, event.CutStopped, x.keptCuts()), reason, startNext)
	}
	waiting, err := t.parked(x.sessionID)
	if err != nil {
		return nil, err
	}
	if waiting {
		return nil, t.claims().release(x.sessionID)
	}
	if !startNext {
		return nil, t.claims().retake(x.sessionID, t.now())
	}
	if err := t.claims().resetAttempts(x.sessionID); err != nil {
		return nil, err
	}
	return t.beginExecution(x.sessionID, event.CauseResolution)
}

// turnEnd is a turn's terminal event: succeeded, failed or interrupted.
type turnEnd struct {
	promptID string
	typ      event.Type
	payload  any
	// cut is the reason given to a step of the turn still started:
	// event.CutStopped when the turn's execution was stopped here,
	// event.CutInterrupted when it died.
	cut string
	// kept are cuts the stopped execution appended that storage refused,
	// by step id: written for those steps instead of their checkpoint.
	kept map[string]event.Cut
}

// appendEnd appends a turn's terminal, first cutting the turn's steps still
// started. No execution will ever continue them: without the cut a step
// whose execution was fenced off, died or lost storage mid-stream would
// show as streaming for ever (readMessages). The cut is the terminal
// transaction's own write, not the stopped execution's, so nothing of that
// execution lands after an interrupt (DESIGN §6.4).
func (t *txw) appendEnd(sessionID string, end turnEnd) error {
	if err := t.cutOpenStepsKeeping(sessionID, end.promptID, end.cut, end.kept); err != nil {
		return err
	}
	if _, err := t.append(sessionID, end.typ, end.payload); err != nil {
		return err
	}
	return t.endJobs(sessionID, end) // sub-agents: job.go
}

// cutOpenSteps cuts the prompt's steps still started with
// session.step.cut@1, keeping the text they checkpointed, as the runner
// cuts a stream it stopped or one a dead execution left.
func (t *txw) cutOpenSteps(sessionID, promptID, reason string) error {
	return t.cutOpenStepsKeeping(sessionID, promptID, reason, nil)
}

// cutOpenStepsKeeping is cutOpenSteps writing, for a step in kept, the cut
// its execution made (everything it received) instead of the checkpoint.
func (t *txw) cutOpenStepsKeeping(sessionID, promptID, reason string, kept map[string]event.Cut) error {
	rows, err := t.Query(`SELECT id, text FROM steps WHERE prompt_id = ? AND state = ? ORDER BY idx`, promptID, string(StepStarted))
	if err != nil {
		return fmt.Errorf("cut open steps: %w", err)
	}
	var cuts []event.Cut
	for rows.Next() {
		c := event.Cut{Reason: reason}
		if err := rows.Scan(&c.StepID, &c.Text); err != nil {
			return fmt.Errorf("cut open steps: %w", err)
		}
		if k, ok := kept[c.StepID]; ok && len(k.Text) >= len(c.Text) {
			c = k
		}
		// The runner keeps a step's text within the bound; a tree written
		// before it did may hold more, which no Durable Object would store
		// in the cut (and its turn could then never end).
		c.Text = StoredPrefix(c.Text, MaxStoredText)
		cuts = append(cuts, c)
	}
	for _, c := range cuts {
		if _, err := t.append(sessionID, event.StepCut, c); err != nil {
			return err
		}
	}
	return nil
}

// endTurn appends a turn terminal for the running prompt (cutting its open
// steps) and, in the same transaction, starts the next queued turn or
// releases the claim. An instance that is stopping keeps the claim for a
// queued prompt without starting it, so the next boot starts that turn
// without counting a resume.
func (t *txw) endTurn(sessionID string, end turnEnd, startNext bool) (*plan, error) {
	if err := t.appendEnd(sessionID, end); err != nil {
		return nil, err
	}
	if startNext {
		return t.beginExecution(sessionID, event.CausePrompt)
	}
	return nil, t.claimForQueue(sessionID, true)
}

// claimForQueue keeps the session's claim for its next queued prompt, with
// no execution yet (taking it first unless held), or releases it when
// nothing is queued.
func (t *txw) claimForQueue(sessionID string, held bool) error {
	var queued bool
	if _, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM prompts WHERE session_id = ? AND state = ?)`, []any{sessionID, string(PromptQueued)}, &queued); err != nil {
		return fmt.Errorf("end turn: %w", err)
	}
	if !queued {
		return t.claims().release(sessionID)
	}
	if !held {
		if _, err := t.claims().take(sessionID, t.now()); err != nil {
			return err
		}
	}
	return t.claims().retake(sessionID, t.now())
}

// launch registers a planned execution as running here and starts its
// drain. The caller holds claimMu, so the sweep cannot see the claim without
// also seeing the execution.
func (inst *Instance) launch(p *plan) {
	if p == nil {
		return
	}
	x := inst.register(p)
	go inst.drain(x)
}

func (inst *Instance) register(p *plan) *Execution { return inst.handover(nil, p) }

// handover registers p's execution as the session's, in place of prev if
// prev is still registered: the session never looks idle in between, so
// Close and idle eviction cannot slip in between two queued turns.
func (inst *Instance) handover(prev *Execution, p *plan) *Execution {
	ctx, cancel := context.WithCancelCause(context.Background())
	x := &Execution{inst: inst, id: p.id, sessionID: p.sessionID, promptID: p.promptID, prompt: p.prompt,
		cause: p.cause, attempt: p.attempt, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	inst.mu.Lock()
	if len(inst.running) == 0 {
		inst.idle = make(chan struct{})
	}
	inst.running[p.sessionID] = x
	stopped := inst.stopCause
	inst.mu.Unlock()
	if prev != nil {
		prev.cancel(context.Canceled)
		prev.once.Do(func() { close(prev.done) })
	}
	if stopped != nil {
		cancel(stopped)
	}
	return x
}

// unregister forgets x (if it is still the session's execution here) and
// wakes whoever waits on it.
func (inst *Instance) unregister(x *Execution) {
	inst.mu.Lock()
	if inst.running[x.sessionID] == x {
		delete(inst.running, x.sessionID)
		if len(inst.running) == 0 {
			close(inst.idle)
		}
	}
	inst.mu.Unlock()
	x.cancel(context.Canceled)
	x.once.Do(func() { close(x.done) })
}

// drain runs executions of one session back to back: each terminal may
// start the next queued turn in its own transaction.
func (inst *Instance) drain(x *Execution) {
	for x != nil {
		log := inst.log.With("session", x.sessionID, "execution", x.id, "prompt", x.promptID)
		log.Debug("execution running", "cause", x.cause, "attempt", x.attempt)
		out := inst.runDriver(x)
		next := inst.finish(x, out)
		if x.failed || x.lateInterrupt {
			// job.go: nothing waits for its children any more (and no
			// interrupt request is left to stop them). Before the
			// session's next turn runs, so that turn's children are not
			// taken for this one's.
			inst.interruptChildren(context.WithoutCancel(x.ctx), x.sessionID)
		}
		if next == nil {
			// x is gone: a start that found it running is made now, not at
			// the next wake-up (startWanted). A handover needs none: the
			// claim names the next execution.
			inst.claimMu.Lock()
			if x.startWanted {
				inst.startLocked(context.WithoutCancel(x.ctx), x.sessionID, event.CausePrompt)
			}
			inst.claimMu.Unlock()
		}
		x = next
	}
}

func (inst *Instance) runDriver(x *Execution) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = Outcome{Kind: Failed, FailType: event.FailDriver, Message: fmt.Sprintf("driver panicked: %v", r)}
		}
	}()
	return inst.driver.Run(x.ctx, x)
}

// finish records how x ended and returns the next execution if its terminal
// started one. It holds claimMu across each write attempt and the
// bookkeeping so the sweep never sees the claim without the execution or
// vice versa; the lock is let go only while waiting for storage.
//
// A terminal that storage refuses for the whole write schedule, or an
// execution whose own writes ran out of it, ends the turn
// failed{type:"storage"} on the settlement schedule: the execution stays
// registered meanwhile (the session is busy, the sweep leaves it alone), a
// shutdown ends the wait and keeps the claim for the next boot, and a
// schedule spent makes the instance read-only and leaves the failure owed
// to the sweep for when storage returns.
func (inst *Instance) finish(x *Execution, out Outcome) *Execution {
	cause := context.Cause(x.ctx)
	if x.ctx.Err() == nil {
		cause = nil
	}
	lost := x.storageLost()
	if errors.Is(cause, errAbandoned) || (cause == nil && out.Kind == Stopped && lost == nil) {
		inst.unregister(x)
		return nil
	}
	inst.testHooks().finishing.run(x) // an interrupt can land here, after the cause was read (Interrupt)
	startNext := !inst.isClosed()
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()

	// The terminal must land whatever happened to x's context; only the
	// instance stopping cuts its waits short.
	ctx := context.WithoutCancel(x.ctx)
	interrupted := errors.Is(cause, ErrInterrupted) || errors.Is(cause, ErrSuperseded)
	var next *plan
	w := inst.newWrite()
	w.fence, w.locked = &fence{sessionID: x.sessionID, executionID: x.id}, true
	record := func(t *txw) error {
		next = nil
		x.recordBegun = true
		var err error
		switch {
		case errors.Is(cause, ErrShutdown):
			_, err = t.append(x.sessionID, event.ExecutionInterrupted, event.Interrupted{ExecutionID: x.id, PromptID: x.promptID, Reason: event.ReasonShutdown})
		case errors.Is(cause, errTaskEnded):
			reason, rerr := t.taskEndReason(x.sessionID, x.promptID)
			if rerr != nil {
				return rerr
			}
			next, err = t.endTaskTurn(x.sessionID, x.end(event.ExecutionInterrupted, event.Interrupted{ExecutionID: x.id, PromptID: x.promptID, Reason: reason}), reason, startNext)
		case interrupted:
			upTo, unanswered := x.interruptCutoff()
			x.lateInterrupt = unanswered
			next, err = t.interruptQueue(x.sessionID, x.end(event.ExecutionInterrupted, event.Interrupted{ExecutionID: x.id, PromptID: x.promptID, Reason: reasonOf(cause)}), reasonOf(cause), upTo, startNext)
		case out.Kind == Succeeded:
			next, err = t.endTurn(x.sessionID, x.end(event.ExecutionSucceeded, event.Succeeded{ExecutionID: x.id, PromptID: x.promptID}), startNext)
		case out.Kind == Failed:
			next, err = t.endTurn(x.sessionID, x.end(event.ExecutionFailed, event.Failed{ExecutionID: x.id, PromptID: x.promptID, Type: out.FailType, Message: out.Message}), startNext)
		case out.Kind == RetryLater:
			err = t.scheduleRetry(x, out)
		case out.Kind == Parked:
			next, err = t.park(x, out.Park, startNext)
		}
		return err
	}

	var err error
	storageEnd := false // the turn's record is (to be) failed{type:"storage"}
	switch {
	case cause == nil && lost != nil:
		storageEnd = true
		next, err = inst.failStorage(ctx, x, lost, nil, startNext)
	default:
		err = w.run(ctx, record)
		switch {
		case !isStorageFailure(err) || errors.Is(cause, ErrShutdown):
			// A shutdown keeps the claim whether or not its record landed.
		case interrupted:
			// The user's interrupt is what must land, not a storage failure:
			// that would start the queue the interrupt cancels.
			err = w.runOn(ctx, retry.Settlement(), record)
			if isStorageFailure(err) {
				inst.enterReadOnly(err)
			}
		default:
			storageEnd = true
			var snext *plan
			snext, err = inst.failStorage(ctx, x, err, w, startNext)
			if errors.Is(err, errPriorStored) {
				err, storageEnd = nil, false // the outcome's own record had committed
			} else {
				next = snext
			}
		}
	}
	if err == nil && cause == nil && !storageEnd && out.Kind == RetryLater {
		// The wake-up brings the turn back at RetryAt, here or after a restart.
		if aerr := inst.host.Wake.Arm(ctx, out.RetryAt); aerr != nil {
			inst.log.Warn("arm wake-up for retry", "session", x.sessionID, "err", aerr)
		}
	}
	if ended := turnEndState(cause, out, storageEnd); ended != "" && err == nil {
		// A child's end may have admitted its parent's notice or resolved
		// its parent's waiting call: the parent goes on here (job.go).
		inst.afterChildTurn(ctx, x.sessionID)
		// A failed turn ended the jobs of foreground children it had not
		// parked on yet; one running here must be stopped, as after an
		// interrupt, once the claim lock is let go (drain).
		x.failed = ended == PromptFailed
	}
	if err != nil {
		level := inst.log.Warn
		if errors.Is(err, ErrFenced) {
			level = inst.log.Debug
		}
		level("execution ended without its record", "session", x.sessionID, "execution", x.id, "err", err)
		next = nil
	}
	if next == nil {
		// A start made while x was registered (a reply or a child's end
		// that resolved the step x parked, a prompt or notice admitted
		// after x's terminal committed, during a wait for storage of this
		// record with the claim lock let go, say) is drain's to make now
		// (startWanted).
		inst.unregister(x)
		return nil
	}
	return inst.handover(x, next)
}

// StorageFailurePrefix starts the message of every failed{type:"storage"}.
const StorageFailurePrefix = "Couldn't save the session: "

// failStorage ends x's turn failed{type:"storage"} on the settlement
// schedule, starting the next queued turn if startNext. prior, if set, is
// the terminal that exhausted the write schedule: should it turn out
// committed after all, failStorage returns errPriorStored and writes
// nothing. The caller holds claimMu.
func (inst *Instance) failStorage(ctx context.Context, x *Execution, lost error, prior *write, startNext bool) (*plan, error) {
	message := StorageFailurePrefix + storage.Describe(lost) + "."
	var next *plan
	w := inst.newWrite()
	w.fence, w.locked, w.prior = &fence{sessionID: x.sessionID, executionID: x.id}, true, prior
	err := w.runOn(ctx, retry.Settlement(), func(t *txw) error {
		var err error
		next, err = t.endTurn(x.sessionID, x.end(event.ExecutionFailed, event.Failed{ExecutionID: x.id, PromptID: x.promptID, Type: event.FailStorage, Message: message}), startNext)
		return err
	})
	switch {
	case err == nil:
		inst.log.Warn("turn failed: storage refused its writes", "session", x.sessionID, "execution", x.id, "err", lost)
	case isStorageFailure(err):
		// Storage did not come back within the settlement window: a quota
		// that stays. The claim stays too, and the sweep writes the failure
		// once storage takes writes again.
		inst.enterReadOnly(err)
		inst.owe(x, message)
	case errors.Is(err, ErrClosed):
		inst.log.Info("shutdown during the wait for storage; the claim stays for the next boot", "session", x.sessionID, "execution", x.id)
	}
	return next, err
}

// end is a terminal of x's turn, written while x runs here (or has just
// stopped): a step it leaves open was stopped, not abandoned by a death.
func (x *Execution) end(typ event.Type, payload any) turnEnd {
	return turnEnd{promptID: x.promptID, typ: typ, payload: payload, cut: event.CutStopped, kept: x.keptCuts()}
}

func reasonOf(cause error) string {
	if errors.Is(cause, ErrSuperseded) {
		return event.ReasonSuperseded
	}
	return event.ReasonUser
}
