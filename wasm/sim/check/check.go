package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// Rule names one invariant.
type Rule string

// The invariants of DESIGN §14 the checker knows.
const (
	RuleEnds           Rule = "prompt-ends-once"
	RuleQuiescence     Rule = "no-claim-at-quiescence"
	RuleAfterInterrupt Rule = "nothing-after-interrupt"
	RuleBudget         Rule = "attempts-within-budget"
	RuleEffects        Rule = "effects-once"
	RuleSeqs           Rule = "seqs-contiguous"
	RuleProjections    Rule = "projections-rebuild"
	RuleNotices        Rule = "notice-once"
	RuleSteps          Rule = "step-never-rerequested"
	RuleZombie         Rule = "zombie-never-commits"
	RuleSettled        Rule = "calls-settled-before-next-step"
	RuleCutKeeps       Rule = "cut-keeps-checkpoint"
	// The rules of moments (moment.go): seen by the host while the tree
	// ran, reported through Ledger.Observed.
	RuleWakeArmed   Rule = "claim-has-wake-up"
	RuleClaimed     Rule = "open-prompt-has-claim"
	RuleBootResumes Rule = "boot-resumes-every-claim"
	// The rules of durable questions are in questions.go, those of
	// sub-agents in tasks.go.
)

// Rules lists every rule, in the order summaries print them.
var Rules = []Rule{RuleEnds, RuleQuiescence, RuleAfterInterrupt, RuleBudget, RuleEffects,
	RuleSeqs, RuleProjections, RuleNotices, RuleSteps, RuleZombie, RuleSettled, RuleCutKeeps, RuleWakeArmed, RuleClaimed, RuleBootResumes,
	RuleEmits, RuleDeltas, RuleQuestionOnce, RuleQuestionByClient, RuleQuestionListed, RuleContinuation,
	RuleApproval, RuleAlways, RuleFinalAsk, RuleChildOnce, RuleNoticeOnce, RuleJobSettled, RuleOrphanChild, RuleTaskResult, RuleTaskEndReason,
	RuleChildOwnPrompt, RuleInterruptCause, RuleWakeDue, RuleWakeLoop, RuleStartsHere, RuleRetryNotEarly, RuleRetryBudget, RuleRetryDelay, RuleRetryHint,
	RuleRetryNotResumed, RuleRetryOwned, RuleDeleteGone, RuleDeleteAnswer, RuleDeleteEmpty}

// Violation is one broken invariant, tied to the first event that shows it
// when there is one.
type Violation struct {
	Tree    string // Options.Label
	Session string
	Seq     int64      // the first bad event; 0 when no event shows it
	Type    event.Type // that event's type
	Rule    Rule
	Detail  string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Rule, v.Tree)
	if v.Session != "" {
		fmt.Fprintf(&b, " session %s", v.Session)
	}
	if v.Seq != 0 {
		fmt.Fprintf(&b, " event #%d %s", v.Seq, v.Type)
	}
	b.WriteString(": ")
	b.WriteString(v.Detail)
	return b.String()
}

// Options tune a check.
type Options struct {
	// Label names the tree in violations (a seed and session, a path).
	Label string
	// Budget is the resume budget the tree ran with; 0 means the ledger's
	// (Ledger.Budget), or core's default.
	Budget int
	// Cut judges a database taken while the tree still ran (just before a
	// client's delete committed, DeletedTree): the rules that hold only
	// once the tree went quiet (every prompt ended, every job settled, no
	// claim left, every park resolved continued) are left out, since the
	// delete cut that work short; every other rule holds as at quiescence.
	Cut bool
}

// Result is what one tree's check found.
type Result struct {
	Sessions   int
	Events     int
	Prompts    int
	Ends       map[string]int // "succeeded", "failed:aborted", "interrupted:user", "cancelled:superseded", …
	Resumes    int
	Calls      int
	Deliveries int
	// Questions counts the questions asked; Answered and Cancelled those
	// resolved so (Cancelled by a reply, a sibling's cancel or an
	// interrupt); Continued the parks continued from their answers.
	Questions, Answered, Cancelled, Continued int
	// Children counts the sub-agents (Background of them in the
	// background); Notices the background notices admitted; TaskResults
	// the foreground calls resolved by their child's end; Orphaned the
	// children whose job ended before their turn did (parent interrupted).
	Children, Background, Notices, TaskResults, Orphaned int
	// ChildQuestions counts the questions and permission requests children
	// asked (ChildAnswered of them answered or approved); WaitingOnChild
	// the turns left waiting at quiescence on a sub-agent that waits for
	// an answer; AlwaysRules the rules always replies saved.
	ChildQuestions, ChildAnswered, WaitingOnChild, AlwaysRules int
	// ChildPrompts counts the prompts clients sent to children (their
	// own, RuleChildOwnPrompt); ChildPromptsOK those that succeeded.
	ChildPrompts, ChildPromptsOK int
	// MultiCallSteps counts the steps recorded complete with more than one
	// tool call.
	MultiCallSteps int
	// Retries counts the provider retries scheduled; RetriesGaveUp the
	// turns that failed model once their step's retries were spent.
	Retries, RetriesGaveUp int
	// WakeStarts counts the executions a wake-up started for a claim the
	// instance it was delivered to had taken (RuleStartsHere);
	// WakeStartsFaulted those of them excused by a storage fault since.
	WakeStarts, WakeStartsFaulted int

	Violations []Violation
}

// Tree checks the tree database at path, at quiescence, against the ledger
// of what its egress did (nil for a tree with no recorded effects). The
// database is opened read-only. An error means the tree could not be read;
// broken invariants are Result.Violations.
func Tree(path string, ledger *Ledger, opts Options) (Result, error) {
	if ledger == nil {
		ledger = &Ledger{}
	}
	if opts.Budget <= 0 {
		opts.Budget = ledger.Budget
	}
	if opts.Budget <= 0 {
		opts.Budget = core.DefaultResumeBudget
	}
	if opts.Label == "" {
		opts.Label = path
	}
	c, err := openReadOnly(path)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	db := conn{c}
	h, err := load(db)
	if err != nil {
		return Result{}, fmt.Errorf("check %s: %w", opts.Label, err)
	}
	ck := &checker{opts: opts, h: h, calls: map[string]*call{}, turns: map[string]*turn{}, queued: map[string]int{},
		questions: map[string]*question{}, asking: map[string]bool{}, permCalls: map[string][]string{}, roots: map[string]string{}, waitingIn: map[string]bool{}, orders: map[string]sessionOrder{}, ledger: ledger,
		sub: newSubagents(), res: Result{Ends: map[string]int{}}}
	for _, sid := range h.order {
		ck.session(sid, h.logs[sid])
	}
	for _, sid := range h.order {
		ck.settle(sid)
	}
	ck.subagentRules()
	ck.childOwnPrompts()
	ck.interruptCauses()
	ck.quiescence()
	ck.effects(ledger)
	ck.replies(ledger)
	ck.oneBodyPerResponse(ledger)
	ck.approvals()
	ck.alwaysRules()
	ck.finalAsks()
	ck.observed(ledger)
	ck.emits(ledger)
	ck.deltas(ledger)
	ck.startsHere(ledger)
	diffs, err := rebuildDiffs(db)
	var replay *replayError
	switch {
	case errors.As(err, &replay):
		// Listed with the rest, so the rules that name the cause (a call
		// settled twice, say) are not lost behind the replay's error.
		ck.fail("", nil, RuleProjections, "the log cannot be replayed (%v)", replay.err)
	case err != nil:
		return Result{}, fmt.Errorf("check %s: %w", opts.Label, err)
	}
	for _, d := range diffs {
		ck.fail(d.session, nil, RuleProjections, "table %s row %s is %s stored but %s rebuilt from the log",
			d.table, d.key, row(d.stored), row(d.rebuilt))
	}
	ck.res.Sessions = len(h.order)
	return ck.res, nil
}

func row(r []any) string {
	if r == nil {
		return "missing"
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// history is a tree's database as the checker reads it.
type history struct {
	order  []string // session ids, in creation order
	logs   map[string][]rec
	claims map[string]bool // session → claimed
	retry  map[string]bool // session → the claim sleeps on a scheduled retry
}

// rec is one stored event with its payload decoded into the union of the
// fields the rules look at.
type rec struct {
	event.Event
	// gseq is the event's place in the tree's commit order (0 for rows
	// written before the column existed).
	gseq int64
	p    payload
	// bad is set when the payload did not decode.
	bad error
}

type payload struct {
	PromptID    string           `json:"prompt_id"`
	ExecutionID string           `json:"execution_id"`
	StepID      string           `json:"step_id"`
	CallID      string           `json:"call_id"`
	Cause       string           `json:"cause"`
	TurnStart   bool             `json:"turn_start"`
	Attempt     int              `json:"attempt"`
	RetryAt     int64            `json:"at"` // a retry's due time
	Reason      string           `json:"reason"`
	Message     string           `json:"message"`
	Kind        string           `json:"type"`
	Role        string           `json:"role"`
	Text        string           `json:"text"`
	Offset      int              `json:"offset"`
	Index       int              `json:"index"`
	ToolCalls   []event.ToolCall `json:"tool_calls"`
	Outcome     string           `json:"outcome"`
	Ran         bool             `json:"ran"`
	Key         string           `json:"idempotency_key"`
	RootID      string           `json:"root_id"`
	// A park's blockers; a resolution's blocker and response.
	Blockers []struct {
		ID      string          `json:"id"`
		Kind    string          `json:"kind"`
		CallID  string          `json:"call_id"`
		Request json.RawMessage `json:"request"`
	} `json:"blockers"`
	BlockerID  string          `json:"blocker_id"`
	ResponseID string          `json:"response_id"`
	Reply      json.RawMessage `json:"reply"`
	// A rule an always reply saved (always.go).
	Action   string `json:"action"`
	Resource string `json:"resource"`
	Exact    bool   `json:"exact"`
	// Sub-agents: a child's parent, a job's child, a prompt's client id,
	// a settlement's output.
	ParentID   string `json:"parent_id"`
	ChildID    string `json:"child_id"`
	Background bool   `json:"background"`
	ClientID   string `json:"client_id"`
	Output     string `json:"output"`
}

func load(db conn) (*history, error) {
	h := &history{logs: map[string][]rec{}, claims: map[string]bool{}, retry: map[string]bool{}}
	err := db.Tx(context.Background(), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT session_id, seq, id, type, at, data, COALESCE(gseq, 0) FROM events ORDER BY session_id, seq`)
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		first := map[string]int64{} // session → gseq-free creation order key
		for rows.Next() {
			var r rec
			var typ, data string
			if err := rows.Scan(&r.SessionID, &r.Seq, &r.ID, &typ, &r.At, &data, &r.gseq); err != nil {
				return err
			}
			r.Type, r.Data = event.Type(typ), json.RawMessage(data)
			r.bad = json.Unmarshal(r.Data, &r.p)
			if _, ok := h.logs[r.SessionID]; !ok {
				h.order = append(h.order, r.SessionID)
				first[r.SessionID] = r.At
			}
			h.logs[r.SessionID] = append(h.logs[r.SessionID], r)
		}
		sort.SliceStable(h.order, func(i, j int) bool { return first[h.order[i]] < first[h.order[j]] })
		rows, err = tx.Query(`SELECT session_id, retry_at IS NOT NULL FROM claims ORDER BY session_id`)
		if err != nil {
			return fmt.Errorf("read claims: %w", err)
		}
		for rows.Next() {
			var sid string
			var retry bool
			if err := rows.Scan(&sid, &retry); err != nil {
				return err
			}
			h.claims[sid], h.retry[sid] = true, retry
		}
		return nil
	})
	return h, err
}

// call is what the log says about one tool call.
type call struct {
	id, session, prompt, name string
	completedSeq              int64
	completed                 *rec   // the step.completed that asked for it
	key                       string // from its executing record
	executing                 *rec
	settled                   *rec
}

// turn is what the log says about one admitted prompt.
type turn struct {
	id       string
	admitted rec
	end      *rec
	started  bool
	resumes  int // resumes counted since the turn's last progress
	pending  *rec
	retrying bool // a retry.scheduled since the turn's last execution started
	notices  int
	aborting *rec // a count past the budget, whose abort must follow at once
	// budgetAbort: the turn ended failed{aborted} right after a count
	// past the budget (aborting), not for any other reason.
	budgetAbort bool
	steps       int
	work        *rec // its latest step.started or tool.executing: new work, never a stop's
	final       *rec // a step recorded complete without tool calls
	completed   map[string]bool
	cut         map[string]bool
	// checkpointed is each step's text as its checkpoints kept it.
	checkpointed map[string]string
	calls        []*call // of its completed steps, in order
	parked       *park   // its latest park (questions.go)
	// stepRetries counts the retries scheduled since the turn's last
	// step recorded complete; retry is the latest not yet started
	// (retry.go).
	stepRetries int
	retry       *rec
}

type checker struct {
	opts  Options
	h     *history
	res   Result
	calls map[string]*call
	turns map[string]*turn // of the tree: prompt ids are unique tree-wide
	// admitted are the tree's prompt ids in the order the checker met them.
	admitted []string
	queued   map[string]int // session → prompts admitted and not ended
	// questions are the tree's questions by id (questions.go); roots maps
	// each session to its root; waitingIn are the sessions whose open
	// turn is parked with a question pending at quiescence.
	questions map[string]*question
	asking    map[string]bool     // calls that asked a question
	permCalls map[string][]string // calls that asked for permission → their request ids
	roots     map[string]string
	waitingIn map[string]bool
	orders    map[string]sessionOrder // session → its prompts' order (settle)
	saved     []*rec                  // the tree's permission.rule_saved records, in log order (always.go)
	ledger    *Ledger
	sub       subagents // tasks.go
}

// eventually is fail for a rule that holds only once the tree went quiet:
// nothing in a cut check (Options.Cut).
func (ck *checker) eventually(session string, at *rec, rule Rule, format string, args ...any) {
	if ck.opts.Cut {
		return
	}
	ck.fail(session, at, rule, format, args...)
}

func (ck *checker) fail(session string, at *rec, rule Rule, format string, args ...any) {
	v := Violation{Tree: ck.opts.Label, Session: session, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	if at != nil {
		v.Seq, v.Type = at.Seq, at.Type
	}
	ck.res.Violations = append(ck.res.Violations, v)
}

// progress reports whether e is progress in DESIGN §6.6's sense: it resets
// the resume count in its own transaction.
func progress(e rec) bool {
	switch e.Type {
	case event.StepCompleted, event.Progress:
		return true
	case event.ToolSettled:
		return e.p.Ran
	}
	return false
}

// session walks one session's log in seq order.
func (ck *checker) session(sid string, log []rec) {
	ck.res.Events += len(log)
	for i := range log {
		e := &log[i]
		if e.Seq != int64(i+1) {
			ck.fail(sid, e, RuleSeqs, "seq %d is event %d of the log: seqs must be contiguous from 1", e.Seq, i+1)
			break
		}
	}
	if len(log) > 0 && log[0].Type != event.SessionCreated {
		ck.fail(sid, &log[0], RuleSeqs, "the log starts with %s, not %s", log[0].Type, event.SessionCreated)
	}

	w := &walk{ck: ck, sid: sid, stepPrompt: map[string]string{}, stepExec: map[string]string{}, execPrompt: map[string]string{}}
	for i := range log {
		var prev *rec
		if i > 0 {
			prev = &log[i-1]
		}
		w.event(&log[i], prev)
	}
	ck.orders[sid] = sessionOrder{admitted: w.order, started: w.startOrder}
}

// walk is what session keeps while it reads one session's log in order.
type walk struct {
	ck         *checker
	sid        string
	stepPrompt map[string]string // step → prompt
	stepExec   map[string]string // step → execution that started it
	execPrompt map[string]string // execution → prompt
	running    string            // prompt whose turn is open
	current    string            // the session's latest execution
	order      []string          // prompts in admission order
	startOrder []string          // turns in start order
}

// owner is the prompt whose turn e belongs to, "" for none.
func (w *walk) owner(e *rec) string {
	switch {
	case e.p.PromptID != "":
		return e.p.PromptID
	case e.p.StepID != "":
		return w.stepPrompt[e.p.StepID]
	case e.p.CallID != "":
		if c := w.ck.calls[e.p.CallID]; c != nil {
			return c.prompt
		}
	case e.p.ExecutionID != "":
		return w.execPrompt[e.p.ExecutionID]
	}
	return ""
}

// event judges e, the event after prev (nil for the first).
func (w *walk) event(e, prev *rec) {
	ck, sid := w.ck, w.sid
	if e.bad != nil {
		ck.fail(sid, e, RuleProjections, "payload does not decode: %v", e.bad)
		return
	}
	if e.Type == event.SessionCreated {
		ck.roots[sid] = e.p.RootID
	}
	ck.noteSubagent(sid, e)
	if e.Type == event.PermissionRuleSaved {
		ck.saved = append(ck.saved, e) // of no turn: judged in always.go
		return
	}
	if ck.taskEvent(sid, e) {
		return
	}
	if e.Type == event.PromptAdmitted {
		if ck.turns[e.p.PromptID] != nil {
			ck.fail(sid, e, RuleEnds, "prompt %s admitted twice", e.p.PromptID)
			return
		}
		ck.turns[e.p.PromptID] = &turn{id: e.p.PromptID, admitted: *e, completed: map[string]bool{}, cut: map[string]bool{}, checkpointed: map[string]string{}}
		ck.res.Prompts++
		w.order = append(w.order, e.p.PromptID)
		ck.admitted = append(ck.admitted, e.p.PromptID)
		return
	}
	switch e.Type {
	case event.StepStarted:
		w.stepPrompt[e.p.StepID], w.stepExec[e.p.StepID] = e.p.PromptID, e.p.ExecutionID
	case event.ExecutionStarted:
		w.execPrompt[e.p.ExecutionID] = e.p.PromptID
	}
	// Judged whatever turn it names, or none.
	if resolution(e) {
		ck.resolve(sid, e, ck.ledger)
	} else if taskResolution(e) {
		ck.resolveTask(sid, e)
	}
	pid := w.owner(e)
	if pid == "" {
		switch {
		case e.Type == event.MessageAdded && e.p.Role == event.RoleNotice:
			ck.fail(sid, e, RuleNotices, "a continuation notice outside any turn")
		case e.Type == event.ToolExecuting || e.Type == event.ToolSettled:
			ck.fail(sid, e, RuleEffects, "call %s runs but no completed step asked for it", e.p.CallID)
		}
		return
	}
	tr := ck.turns[pid]
	if tr == nil {
		ck.fail(sid, e, RuleEnds, "%s names prompt %s, never admitted", e.Type, pid)
		return
	}
	if tr.end != nil {
		rule := RuleEnds
		if stoppedForGood(tr.end) {
			rule = RuleAfterInterrupt
		}
		ck.fail(sid, e, rule, "written for prompt %s after its end #%d %s", pid, tr.end.Seq, endName(*tr.end))
		return
	}
	if tr.aborting != nil && !(e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted) {
		ck.fail(sid, e, RuleBudget, "attempt %d is past the budget of %d, but the turn goes on instead of failing aborted",
			tr.aborting.p.Attempt, ck.opts.Budget)
		tr.aborting = nil
	}
	// A write of an execution that a newer one has replaced went past
	// the fence: that is a zombie's commit.
	if (e.Type == event.TextCheckpoint || e.Type == event.StepCompleted) && w.stepExec[e.p.StepID] != w.current {
		ck.fail(sid, e, RuleZombie, "step %s of execution %s is written after execution %s replaced it",
			e.p.StepID, w.stepExec[e.p.StepID], w.current)
	}
	if progress(*e) || ck.answeredSettlement(e) {
		tr.resumes = 0
	}
	ck.whileParked(sid, e, prev, tr)
	switch e.Type {
	case event.StepParked:
		ck.parked(sid, e, tr)
	case event.ExecutionStarted:
		w.executionStarted(e, tr, pid)
	case event.ExecutionResumed:
		w.executionResumed(e, tr, pid)
	case event.RetryScheduled:
		tr.retrying = true
		ck.retryScheduled(sid, e, tr)
	case event.MessageAdded:
		if e.p.Role == event.RoleNotice {
			w.notice(e, tr)
		}
	case event.StepStarted:
		w.stepStarted(e, tr)
	case event.StepCompleted, event.StepCut:
		w.stepEnded(e, tr, pid)
	case event.TextCheckpoint:
		ck.checkpoint(sid, e, tr)
	case event.ToolExecuting:
		w.toolExecuting(e, tr)
	case event.ToolSettled:
		w.toolSettled(e)
	case event.ExecutionSucceeded, event.ExecutionFailed, event.ExecutionInterrupted, event.PromptCancelled:
		w.ended(e, tr, pid)
	}
}

// executionStarted judges an execution's start in turn tr of prompt pid:
// a turn's first, or its continuation as a counted resume, a scheduled
// retry or its park's resolution, never anything else.
func (w *walk) executionStarted(e *rec, tr *turn, pid string) {
	ck, sid := w.ck, w.sid
	if e.p.Cause == event.CauseResolution && tr.parked != nil && tr.parked.continued == e {
		ck.res.Continued++
	}
	if e.p.Cause == event.CauseRetry {
		ck.retryStarted(sid, e, tr)
	}
	if tr.pending != nil {
		if e.p.Cause != event.CauseResume {
			ck.fail(sid, e, RuleBudget, "resume #%d is followed by a %s start, not a resumed execution", tr.pending.Seq, e.p.Cause)
		} else if want := tr.noticesWanted(); tr.notices != want {
			ck.fail(sid, e, RuleNotices, "the resumed execution starts after %d continuation notices, want %d", tr.notices, want)
		}
	} else if e.p.Cause == event.CauseResume {
		ck.fail(sid, e, RuleBudget, "a resumed execution of %s starts without its own execution.resumed", pid)
	} else if !e.p.TurnStart && !(e.p.Cause == event.CauseRetry && tr.retrying) &&
		!(e.p.Cause == event.CauseResolution && tr.parked != nil && tr.parked.continued == e) {
		// An open turn goes on in a new execution only as a counted
		// resume, after its scheduled retry, or from the resolution
		// of its park (whileParked): anything else restarts a dead
		// execution past the budget.
		ck.fail(sid, e, RuleBudget, "an execution of %s continues its turn (cause %q) without counting a resume", pid, e.p.Cause)
	}
	tr.pending, tr.notices, tr.retrying = nil, 0, false
	if e.p.TurnStart {
		if w.running != "" {
			ck.fail(sid, e, RuleEnds, "the turn of %s starts while the turn of %s is open", pid, w.running)
		}
		if tr.started {
			ck.fail(sid, e, RuleEnds, "the turn of %s starts twice", pid)
		}
		tr.started, tr.resumes = true, 0
		w.running = pid
		w.startOrder = append(w.startOrder, pid)
	} else if w.running != pid {
		ck.fail(sid, e, RuleEnds, "an execution of %s continues a turn that is not open", pid)
	}
	w.current = e.p.ExecutionID
}

// executionResumed judges a counted resume of turn tr: within the
// budget, numbered one past the resumes without progress before it, never
// while the turn is parked on a question.
func (w *walk) executionResumed(e *rec, tr *turn, pid string) {
	ck, sid := w.ck, w.sid
	ck.res.Resumes++
	ck.retryResumed(sid, e, tr)
	if ck.waiting(tr) {
		ck.fail(sid, e, RuleContinuation, "the parked turn of %s is resumed while a question is pending: parking consumes no budget and waits", pid)
	}
	if w.running != pid {
		ck.fail(sid, e, RuleEnds, "a resume of %s, whose turn is not open", pid)
	}
	if tr.pending != nil {
		ck.fail(sid, e, RuleBudget, "resume #%d never started an execution before this one", tr.pending.Seq)
	}
	want := tr.resumes + 1
	switch {
	case e.p.Attempt > ck.opts.Budget+1:
		ck.fail(sid, e, RuleBudget, "attempt %d is past the budget of %d", e.p.Attempt, ck.opts.Budget)
	case e.p.Attempt != want:
		ck.fail(sid, e, RuleBudget, "attempt %d, but %d resumes without progress came before it", e.p.Attempt, want-1)
	}
	tr.resumes = e.p.Attempt
	if e.p.Attempt > ck.opts.Budget {
		tr.aborting = e
	} else {
		tr.pending, tr.notices = e, 0
	}
}

// notice judges a continuation notice: one per resume, after it.
func (w *walk) notice(e *rec, tr *turn) {
	ck, sid := w.ck, w.sid
	switch {
	case tr.pending == nil:
		ck.fail(sid, e, RuleNotices, "a continuation notice without a resume before it")
	case tr.notices > 0:
		ck.fail(sid, e, RuleNotices, "a second continuation notice for resume #%d", tr.pending.Seq)
	}
	if e.p.Text != event.ContinuationNotice {
		ck.fail(sid, e, RuleNotices, "the notice reads %q", e.p.Text)
	}
	tr.notices++
}

// noticesWanted is how many continuation notices a resume of tr adds: one,
// none once the turn's final answer is recorded (the resumed execution
// only ends the turn, and the model is never asked after the notice).
func (tr *turn) noticesWanted() int {
	if tr.final != nil {
		return 0
	}
	return 1
}

// stepStarted judges a model step's start: never after the final answer,
// never one requested again, only by the session's latest execution.
func (w *walk) stepStarted(e *rec, tr *turn) {
	ck, sid := w.ck, w.sid
	if tr.final != nil {
		ck.fail(sid, e, RuleSteps, "a step is requested after step %s was recorded complete with the final answer (#%d)", tr.final.p.StepID, tr.final.Seq)
	}
	if e.p.Index != tr.steps+1 {
		ck.fail(sid, e, RuleSteps, "step index %d after %d steps of the turn: a step is requested again", e.p.Index, tr.steps)
	}
	ck.settledBefore(sid, e, tr, "step "+e.p.StepID+" starts")
	tr.steps++
	tr.work = e
	if e.p.ExecutionID != w.current {
		ck.fail(sid, e, RuleZombie, "execution %s starts a step after execution %s replaced it", e.p.ExecutionID, w.current)
	}
}

// stepEnded judges a step's completion or cut (once, of a step that
// started) and records the tool calls a completed step asks for.
func (w *walk) stepEnded(e *rec, tr *turn, pid string) {
	ck, sid := w.ck, w.sid
	switch {
	case tr.completed[e.p.StepID]:
		ck.fail(sid, e, RuleSteps, "step %s was already recorded complete", e.p.StepID)
	case tr.cut[e.p.StepID]:
		ck.fail(sid, e, RuleSteps, "step %s was already cut", e.p.StepID)
	case w.stepPrompt[e.p.StepID] == "":
		ck.fail(sid, e, RuleSteps, "step %s never started", e.p.StepID)
	}
	ck.keepsCheckpoint(sid, e, tr)
	if e.Type == event.StepCut {
		tr.cut[e.p.StepID] = true
		return
	}
	tr.completed[e.p.StepID] = true
	tr.stepRetries = 0
	if len(e.p.ToolCalls) == 0 {
		tr.final = e
	}
	if len(e.p.ToolCalls) > 1 {
		ck.res.MultiCallSteps++
	}
	for _, c := range e.p.ToolCalls {
		if ck.calls[c.CallID] != nil {
			ck.fail(sid, e, RuleEffects, "call id %s was minted twice", c.CallID)
			continue
		}
		ck.calls[c.CallID] = &call{id: c.CallID, session: sid, prompt: pid, name: c.Name, completedSeq: e.Seq, completed: e}
		tr.calls = append(tr.calls, ck.calls[c.CallID])
		ck.res.Calls++
	}
}

// toolExecuting judges a call's execution: of a call a step asked for,
// never after it settled, always under its first idempotency key.
func (w *walk) toolExecuting(e *rec, tr *turn) {
	ck, sid := w.ck, w.sid
	c := ck.calls[e.p.CallID]
	if c == nil {
		ck.fail(sid, e, RuleEffects, "call %s executes but no completed step asked for it", e.p.CallID)
		return
	}
	switch {
	case c.settled != nil:
		ck.fail(sid, e, RuleEffects, "call %s executes again after it settled (#%d)", c.id, c.settled.Seq)
	case c.executing != nil && c.key != e.p.Key:
		ck.fail(sid, e, RuleEffects, "call %s executes with key %s, first with %s", c.id, e.p.Key, c.key)
	case e.p.Key == "":
		ck.fail(sid, e, RuleEffects, "call %s executes without an idempotency key", c.id)
	}
	if c.executing == nil {
		c.executing, c.key = e, e.p.Key
	}
	tr.work = e
}

// toolSettled judges a call's settlement: once, of a call a step asked for.
func (w *walk) toolSettled(e *rec) {
	ck, sid := w.ck, w.sid
	c := ck.calls[e.p.CallID]
	if c == nil {
		ck.fail(sid, e, RuleEffects, "call %s settles but no completed step asked for it", e.p.CallID)
		return
	}
	if c.settled != nil {
		ck.fail(sid, e, RuleEffects, "call %s settles twice (first #%d)", c.id, c.settled.Seq)
		return
	}
	c.settled = e
}

// ended judges a terminal of turn tr (an interruption for shutdown is
// none: it keeps the claim, and the turn resumes): a cancel only of a
// prompt whose turn never started, any other end only of the open turn.
func (w *walk) ended(e *rec, tr *turn, pid string) {
	ck, sid := w.ck, w.sid
	if e.Type == event.ExecutionInterrupted && e.p.Reason == event.ReasonShutdown {
		return
	}
	ck.endRules(sid, e, tr)
	ck.failedModel(sid, e, tr)
	tr.end = e
	tr.budgetAbort = tr.aborting != nil && e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted
	tr.aborting = nil
	ck.res.Ends[endName(*e)]++
	if e.Type == event.PromptCancelled {
		if tr.started {
			ck.fail(sid, e, RuleEnds, "prompt %s is cancelled after its turn started", pid)
		}
		return
	}
	if !tr.started && e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted {
		return // recovery aborted a claim whose turn never started
	}
	if w.running != pid {
		ck.fail(sid, e, RuleEnds, "a terminal of %s, whose turn is not open", pid)
	}
	w.running = ""
}

// sessionOrder is a session's prompts in admission order and its turns in
// start order, kept by session for settle.
type sessionOrder struct{ admitted, started []string }

// settle judges how a session's prompts stand at quiescence: ended, or
// visibly waiting (with the prompts queued behind), and started in
// admission order. It runs once every session's log was read: a turn
// waiting on a sub-agent waits only while its child's turn does, and the
// child's log comes after its parent's.
func (ck *checker) settle(sid string) {
	order, startOrder := ck.orders[sid].admitted, ck.orders[sid].started
	var fifo []string
	for _, pid := range order {
		tr := ck.turns[pid]
		ck.endedParked(sid, tr)
		if ck.waiting(tr) {
			// Visibly waiting for an answer, and so is every prompt
			// queued behind it.
			ck.waitingIn[sid] = true
			if ck.waitingOnChild(tr) {
				ck.res.WaitingOnChild++
			}
		}
		if tr.end == nil {
			if ck.waitingIn[sid] {
				if ck.waiting(tr) {
					fifo = append(fifo, pid)
				} else if tr.started {
					ck.fail(sid, &tr.admitted, RuleEnds, "prompt %s started while the turn before it waits for an answer", pid)
				}
				continue
			}
			// At quiescence every prompt has ended unless it is visibly
			// waiting. Cut short by a delete, the turn that ran then
			// started in its order.
			if ck.opts.Cut && tr.started {
				fifo = append(fifo, pid)
			}
			ck.eventually(sid, &tr.admitted, RuleEnds, "prompt %s never ended", pid)
			ck.queued[sid]++
			continue
		}
		if tr.end.Type != event.PromptCancelled {
			fifo = append(fifo, pid)
			if !tr.started && !(tr.end.Type == event.ExecutionFailed && tr.end.p.Kind == event.FailAborted) {
				ck.fail(sid, tr.end, RuleEnds, "prompt %s ended %s without its turn starting", pid, endName(*tr.end))
			}
		}
	}
	// An aborted claim fails its oldest queued prompt without starting it,
	// so the start order is compared on the turns that started.
	var started []string
	for _, pid := range fifo {
		if ck.turns[pid].started {
			started = append(started, pid)
		}
	}
	if fmt.Sprint(started) != fmt.Sprint(startOrder) {
		ck.fail(sid, nil, RuleEnds, "turns must start once each in admission order: admitted %v, started %v", started, startOrder)
	}
}

// endName is "succeeded", "failed:TYPE", "interrupted:REASON" or
// "cancelled:REASON".
func endName(e rec) string {
	switch e.Type {
	case event.ExecutionSucceeded:
		return "succeeded"
	case event.ExecutionFailed:
		return "failed:" + e.p.Kind
	case event.ExecutionInterrupted:
		return "interrupted:" + e.p.Reason
	case event.PromptCancelled:
		return "cancelled:" + e.p.Reason
	}
	return string(e.Type)
}

// quiescence: a claim left at the end must have runnable work: a prompt
// not yet ended (already a violation of its own). A scheduled retry is no
// such work on its own: with every prompt ended there is nothing to retry,
// and at quiescence no wake-up is armed to retry it anyway.
func (ck *checker) quiescence() {
	for _, sid := range ck.h.order {
		if ck.h.claims[sid] && ck.queued[sid] == 0 {
			detail := "the session is claimed with no prompt left to run"
			if ck.waitingIn[sid] {
				detail = "the session is claimed while its turn waits for an answer"
			}
			if ck.h.retry[sid] {
				detail += " (the claim still names a scheduled retry)"
			}
			ck.eventually(sid, nil, RuleQuiescence, "%s", detail)
		}
	}
	for _, sid := range slices.Sorted(maps.Keys(ck.h.claims)) {
		if _, known := ck.h.logs[sid]; !known {
			ck.fail(sid, nil, RuleQuiescence, "a claim names a session with no log")
		}
	}
}

// effects judges the ledger against the log.
func (ck *checker) effects(l *Ledger) {
	ck.res.Deliveries = len(l.Deliveries)
	perCall := map[string][]Delivery{}
	applied := map[string]int{}    // tool + key → applications
	keyCall := map[string]string{} // tool + key → call
	for _, d := range l.Deliveries {
		c := ck.calls[d.CallID]
		if c == nil {
			ck.fail("", nil, RuleEffects, "%s received call %s, which no step of the tree made", d.Tool, d.CallID)
			continue
		}
		perCall[d.CallID] = append(perCall[d.CallID], d)
		switch {
		case c.executing == nil:
			ck.fail(c.session, nil, RuleEffects, "call %s reached %s without an executing record before it", c.id, d.Tool)
		case d.Key != c.key:
			ck.fail(c.session, c.executing, RuleEffects, "call %s reached %s with key %q, recorded %q", c.id, d.Tool, d.Key, c.key)
		case committedAfter(c.executing, d.Gseq):
			ck.fail(c.session, c.executing, RuleEffects, "call %s reached %s at commit position %d, before its executing record (gseq %d) committed",
				c.id, d.Tool, d.Gseq, c.executing.gseq)
		}
		// By commit position where the delivery's is known: an end's time
		// is when its write began, and a write that waited for storage
		// (or for a zombie's lock) commits later than that.
		if tr := ck.turns[c.prompt]; tr != nil && tr.end != nil &&
			stoppedForGood(tr.end) &&
			(committedBy(tr.end, d.Gseq) || d.Gseq == 0 && d.At > tr.end.At) {
			ck.fail(c.session, tr.end, RuleAfterInterrupt, "call %s reached %s at %d (commit position %d), after the interrupt committed at %d (gseq %d)",
				c.id, d.Tool, d.At, d.Gseq, tr.end.At, tr.end.gseq)
		}
		k := d.Tool + "\x00" + d.Key
		if prev, ok := keyCall[k]; ok && prev != d.CallID {
			ck.fail(c.session, nil, RuleEffects, "calls %s and %s share idempotency key %s", prev, d.CallID, d.Key)
		}
		keyCall[k] = d.CallID
		if d.Applied {
			applied[k]++
			if d.Idempotent && applied[k] > 1 {
				ck.fail(c.session, nil, RuleEffects, "idempotent %s applied key %s %d times", d.Tool, d.Key, applied[k])
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ck.calls)) {
		c := ck.calls[id]
		ds := perCall[id]
		idempotent, recorded := l.Tools[c.name]
		if n := len(ds); n > 1 && !(recorded && idempotent) && !allIdempotent(ds) {
			ck.fail(c.session, c.settled, RuleEffects, "non-idempotent call %s of %s took effect %d times", id, c.name, n)
		}
		if recorded && len(ds) == 0 && c.settled != nil && c.settled.p.Ran && c.settled.p.Outcome == event.OutcomeOK {
			ck.fail(c.session, c.settled, RuleEffects, "call %s of %s settled ok, but its receiver never saw it", id, c.name)
		}
	}
	for _, pid := range l.Accepted {
		if ck.turns[pid] == nil {
			ck.fail("", nil, RuleEnds, "prompt %s was answered 202 but is not in the log: lost", pid)
		}
	}
	for _, in := range l.Interrupts {
		if in.Sent == 0 || in.Answered == 0 {
			continue
		}
		for _, pid := range ck.admitted {
			tr := ck.turns[pid]
			if tr.admitted.SessionID != in.Session || tr.admitted.gseq == 0 || tr.admitted.gseq > in.Sent {
				continue
			}
			if tr.end == nil || !committedBy(tr.end, in.Answered) {
				end := "never ended"
				if tr.end != nil {
					end = fmt.Sprintf("ended %s only after it (gseq %d)", endName(*tr.end), tr.end.gseq)
				}
				ck.fail(in.Session, tr.end, RuleAfterInterrupt, "an interrupt answered 200 at %d (commit position %d) when prompt %s, admitted before it was sent, had not ended: it %s",
					in.At, in.Answered, pid, end)
				continue
			}
			// Whatever ended the turn, and whether or not this interrupt
			// found anything left to stop, its answer comes only once the
			// turn's work below it has stopped.
			ck.descendantsStopped(answer{what: "an interrupt of " + in.Session, at: in.At, pos: in.Answered}, pid)
		}
	}
	// A reply that ended its turn (a cancelled question, a plain reject)
	// stops the turn's foreground descendants as an interrupt does, before
	// its answer.
	for _, r := range l.Replies {
		q := ck.questions[r.Question]
		if r.Status != 200 || r.Answered == 0 || q == nil || !endsByReply(q.resolved) || q.resolved.p.ResponseID != r.ResponseID {
			continue
		}
		ck.descendantsStopped(answer{what: "a reply ending the turn at " + r.Question, at: r.At, pos: r.Answered}, q.prompt)
	}
	for _, z := range l.ZombieCommits {
		ck.fail("", nil, RuleZombie, "boot %d went past the fence with %s at %d, after boot %d took over", z.Boot, z.What, z.At, z.Latest)
	}
}

// descendantsStopped: an interrupt (or a reply that ends its turn)
// answers 200 only once the task turns
// of the foreground children of turn prompt, which ended by then, have
// stopped, and theirs in turn (a grandchild at work for a child parked on
// it): their jobs ended with the turn, so nothing waits for them any more.
// That holds for the turn this interrupt stopped, and as well for one an
// earlier interrupt, a reply or a failure ended, whose descendants that
// end may not have stopped yet (the interrupt then answers false). Stopped
// means no new work after the answer: no step started, no tool body
// announced, no success. A stop written after it (an interrupted or
// failed end, a cut) is not work: another interrupt racing this one may
// be the one waiting for it, and storage may hold it back.
func (ck *checker) descendantsStopped(in answer, prompt string) {
	for _, child := range slices.Sorted(maps.Keys(ck.sub.jobs)) {
		j := ck.sub.jobs[child]
		if j.background || ck.promptOfCall(j.call) != prompt {
			continue
		}
		tr := ck.taskTurn(j)
		if tr == nil {
			continue
		}
		switch {
		case tr.work != nil && committedAfter(tr.work, in.pos):
			ck.fail(j.child, tr.work, RuleAfterInterrupt, "%s answered 200 at %d (commit position %d), and the task turn %s of its descendant %s went on: %s at gseq %d",
				in.what, in.at, in.pos, tr.id, j.child, tr.work.Type, tr.work.gseq)
		case tr.end != nil && tr.end.Type == event.ExecutionSucceeded && committedAfter(tr.end, in.pos):
			ck.fail(j.child, tr.end, RuleAfterInterrupt, "%s answered 200 at %d (commit position %d), and the task turn %s of its descendant %s succeeded after it (gseq %d)",
				in.what, in.at, in.pos, tr.id, j.child, tr.end.gseq)
		}
		ck.descendantsStopped(in, tr.id)
	}
}

// answer is a client's request that ended a turn, answered 200: what it
// was, when (virtual ms) and the commit position then.
type answer struct {
	what    string
	at, pos int64
}

// committedBy reports whether e was committed by commit position pos (the
// highest gseq committed at some moment; 0: not known).
func committedBy(e *rec, pos int64) bool { return pos > 0 && e.gseq > 0 && e.gseq <= pos }

// committedAfter reports whether e was not yet committed at position pos.
func committedAfter(e *rec, pos int64) bool { return pos > 0 && e.gseq > pos }

func allIdempotent(ds []Delivery) bool {
	for _, d := range ds {
		if !d.Idempotent {
			return false
		}
	}
	return true
}

// stoppedForGood reports whether e is a turn's end by an interruption that
// stops it for good: the user's interrupt, a replace prompt (superseded),
// or, for a sub-agent's task turn, its parent's turn ending without
// waiting for it (orphaned). Nothing of the turn may reach the world
// after it commits. (A shutdown is no end: the turn resumes.)
func stoppedForGood(e *rec) bool {
	if e == nil || e.Type != event.ExecutionInterrupted {
		return false
	}
	switch e.p.Reason {
	case event.ReasonUser, event.ReasonSuperseded, event.ReasonOrphaned:
		return true
	}
	return false
}
