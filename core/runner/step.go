package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/storage"
)

// step requests one model answer and records it. It returns done = true
// with the turn's outcome when the turn must end here.
func (t *turn) step(ctx context.Context, st state, index int) (core.Outcome, bool) {
	stepID := t.x.NewID()
	// The step is recorded started in the transaction that reads the
	// transcript its request is built from: one transaction, not two. On
	// success some attempt's fn ran to its end, and tr is its read: a rerun
	// that finds that commit stored (a late IOERR) runs no fn.
	var tr transcript
	_, err := t.x.AppendFunc(ctx, false, func(tx storage.Tx) ([]core.NewEvent, error) {
		var err error
		if tr, err = t.readTranscript(tx); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
		return []core.NewEvent{{Type: event.StepStarted, Payload: event.StepBegun{StepID: stepID, ExecutionID: t.x.ID(), PromptID: t.x.PromptID(), Index: index}}}, nil
	})
	if err != nil {
		// The turn resumes at the next wake-up. Said, unless a stop or a
		// newer owner ended it: a query every host but one refuses (an
		// argument a Durable Object cannot bind) otherwise retried the
		// step every second with nothing in the log.
		if ctx.Err() == nil && !errors.Is(err, core.ErrFenced) {
			t.x.Log().Warn("start step", "err", err)
		}
		return stopped, true
	}
	req, err := t.buildRequest(tr)
	if err != nil {
		t.x.Log().Warn("build request", "err", err)
		return stopped, true
	}
	s := &streaming{t: t, stepID: stepID}
	done, failure := s.run(ctx, req)
	if errors.Is(s.modelErr, core.ErrFenced) {
		// The host's fence ended the request: a newer instance owns the
		// tree, and the write fence would refuse the cut too. Stop at once;
		// the owner cuts the step when it resumes the turn.
		t.x.Log().Info("model request fenced: this instance is superseded", "step", stepID)
		return stopped, true
	}
	if !done {
		// Stopped or failed mid-stream: keep everything received so far (a
		// kill keeps only the checkpoints; a clean stop can do better).
		cut := event.Cut{StepID: stepID, Text: s.text.String(), Reason: event.CutStopped}
		if failure != "" {
			cut.Reason = failure
		}
		if err := t.append(context.WithoutCancel(ctx), false, event.StepCut, cut); err != nil || failure == "" {
			return stopped, true
		}
		if model.IsRetryable(s.modelErr) && t.r.cfg.providerPolicy().Allows(st.retries) {
			return core.Outcome{Kind: core.RetryLater, RetryAt: t.x.Clock().Now() + t.r.retryDelayMs(s.modelErr, st.retries),
				Attempt: st.retries + 1, Message: failure}, true
		}
		if model.IsRetryable(s.modelErr) {
			failure = fmt.Sprintf("%s (gave up after %d retries)", failure, st.retries)
		}
		return core.Outcome{Kind: core.Failed, FailType: event.FailModel, Message: failure}, true
	}
	calls := s.toolCalls(t.x.NewID)
	rec := event.StepDone{StepID: stepID, Text: s.text.String(), ToolCalls: calls, Finish: s.finish,
		InputTokens: s.usage.InputTokens, OutputTokens: s.usage.OutputTokens}
	// A recorded complete stream is progress: it will never be requested again.
	if err := t.append(ctx, true, event.StepCompleted, rec); err != nil {
		return stopped, true
	}
	if len(calls) == 0 && ctx.Err() == nil {
		// What the next iteration would read back and decide (Run: a
		// completed step that called no tool ends the turn), without the read.
		return core.Outcome{Kind: core.Succeeded}, true
	}
	return core.Outcome{}, false
}

// retryDelayMs is retryDelay in whole milliseconds, rounded up: the host
// clock counts ms, and a wait the provider asked for is never shortened.
func (r *Runner) retryDelayMs(err error, n int) int64 {
	d := r.retryDelay(err, n)
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// retryDelay is how long to wait before retry n+1 of a step: the provider's
// Retry-After when it gave one, else the provider schedule's backoff.
func (r *Runner) retryDelay(err error, n int) time.Duration {
	var me *model.Error
	if errors.As(err, &me) && me.RetryAfter > 0 {
		return me.RetryAfter
	}
	return r.cfg.providerPolicy().Delay(n)
}

// streaming is one step's stream being received.
type streaming struct {
	t        *turn
	stepID   string
	modelErr error // the model's own failure, when that ended the stream
	text     strings.Builder
	saved    int // bytes of text checkpointed
	calls    map[int]*streamedCall
	finish   string
	usage    model.Usage
	stored   int // the answer's text and tool calls as stored (core.StoredLen)
}

// streamedCall is one tool call being received. Its arguments grow in a
// builder: providers stream them a few bytes per delta, and appending to a
// string copies all of it each time, so a 400 KB argument (a file a model
// writes) took a minute of CPU, and one at the stored cap a quarter of an
// hour.
type streamedCall struct {
	name      string
	arguments strings.Builder
}

type received struct {
	chunk model.Chunk
	err   error
}

// run receives the stream until it ends. It reports done = true when the
// answer completed, or a failure message when a watchdog or the model ended
// it; both false/empty mean the execution was stopped.
func (s *streaming) run(ctx context.Context, req model.Request) (done bool, failure string) {
	cfg, clock := s.t.r.cfg, s.t.x.Clock()
	if ctx.Err() != nil {
		// Stopped (an abandoned or superseded instance, a shutdown) after
		// the step-start commit: a request now is wasted money and races
		// the owner's own request for the same step; the fence covers
		// writes only.
		return false, ""
	}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.t.r.model.Stream(streamCtx, req)
	if err != nil {
		if ctx.Err() != nil {
			return false, ""
		}
		s.modelErr = err
		// The event says what a session's reader may know; the cause (a
		// transport's text names the provider's address) is the log's.
		if cause := errors.Unwrap(err); cause != nil {
			s.t.x.Log().Warn("model request failed", "err", err, "cause", cause)
		}
		return false, "The model request failed: " + err.Error()
	}
	defer stream.Close()

	chunks := make(chan received)
	go func() {
		for {
			c, err := stream.Recv(streamCtx)
			select {
			case chunks <- received{c, err}:
			case <-streamCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	fire := func(ch chan struct{}) func() {
		return func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	idle, wall, checkpoint := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	stopWall := clock.AfterFunc(cfg.stepWall, fire(wall))
	defer stopWall()
	stopIdle := clock.AfterFunc(cfg.streamIdle, fire(idle))
	defer func() { stopIdle() }()
	// The idle watchdog counts the model's silence from heard, its last
	// chunk. A checkpoint's wait for storage (up to the write window) is
	// the runner's silence, not the model's, whose chunks wait to be read
	// meanwhile: the count skips it (save).
	heard := clock.Now()
	watchIdle := func(left int64) {
		stopIdle()
		// A channel of its own: a fire of the count this one replaces,
		// even one still on its way, is not taken for this one's.
		idle = make(chan struct{}, 1)
		if left <= 0 {
			fire(idle)()
			stopIdle = func() bool { return false }
			return
		}
		stopIdle = clock.AfterFunc(time.Duration(left)*time.Millisecond, fire(idle))
	}
	save := func() bool {
		began := clock.Now()
		if !s.checkpoint(ctx) {
			return false
		}
		if waited := clock.Now() - began; waited > 0 {
			heard += waited
			watchIdle(heard + cfg.streamIdle.Milliseconds() - clock.Now())
		}
		return true
	}
	var stopCheckpoint func() bool
	defer func() {
		if stopCheckpoint != nil {
			stopCheckpoint()
		}
	}()

	for {
		select {
		case r := <-chunks:
			if errors.Is(r.err, io.EOF) {
				return true, ""
			}
			if r.err != nil {
				if ctx.Err() != nil {
					return false, ""
				}
				s.modelErr = r.err
				return false, "The model stream failed: " + r.err.Error()
			}
			heard = clock.Now()
			watchIdle(cfg.streamIdle.Milliseconds())
			// A step's answer is stored whole in one event: a stream that
			// would pass core.MaxStoredText fails its step, as a watchdog
			// fails it, with the chunks before this one kept.
			if s.stored += s.chunkStored(r.chunk); s.stored > core.MaxStoredText {
				// Not applied: the cut keeps what fits.
				return false, fmt.Sprintf("The model's answer is larger than %d bytes as stored (its text and tool calls as JSON).", core.MaxStoredText)
			}
			s.apply(r.chunk)
			if r.chunk.Text != "" {
				s.t.x.Emit(event.TextDelta, event.Delta{StepID: s.stepID, Text: r.chunk.Text})
			}
			unsaved := s.text.Len() - s.saved
			switch {
			case unsaved >= cfg.checkpointBytes:
				if !save() {
					return false, ""
				}
				if stopCheckpoint != nil {
					stopCheckpoint()
					stopCheckpoint = nil
				}
			case unsaved > 0 && stopCheckpoint == nil:
				stopCheckpoint = clock.AfterFunc(cfg.checkpointEvery, fire(checkpoint))
			}
		case <-checkpoint:
			stopCheckpoint = nil
			if !save() {
				return false, ""
			}
		case <-idle:
			return false, fmt.Sprintf("The model stream sent nothing for %s.", cfg.streamIdle)
		case <-wall:
			return false, fmt.Sprintf("The model step ran longer than %s.", cfg.stepWall)
		case <-ctx.Done():
			return false, ""
		}
	}
}

// checkpoint records the text received since the last one.
func (s *streaming) checkpoint(ctx context.Context) bool {
	text := s.text.String()
	if len(text) == s.saved {
		return true
	}
	if err := s.t.append(ctx, false, event.TextCheckpoint, event.Checkpoint{StepID: s.stepID, Offset: s.saved, Text: text[s.saved:]}); err != nil {
		return false
	}
	s.saved = len(text)
	return true
}

// chunkStored is what c adds to the answer as stored (core.MaxStoredText); a
// new tool call also adds its record's fields (event.ToolCall).
func (s *streaming) chunkStored(c model.Chunk) int {
	n := core.StoredLen(c.Text)
	if d := c.ToolCall; d != nil {
		n += core.StoredLen(d.Name) + core.StoredLen(d.Arguments)
		if s.calls[d.Index] == nil {
			n += callStored
		}
	}
	return n
}

// callStored bounds a tool call's record as stored but its name and
// arguments: {"call_id":"…","index":…,"name":"","arguments":""}, the id
// a minted one (26 characters), the index at most 20 digits.
const callStored = 128

func (s *streaming) apply(c model.Chunk) {
	s.text.WriteString(c.Text)
	if d := c.ToolCall; d != nil {
		if s.calls == nil {
			s.calls = map[int]*streamedCall{}
		}
		call := s.calls[d.Index]
		if call == nil {
			call = &streamedCall{}
			s.calls[d.Index] = call
		}
		if d.Name != "" {
			call.name = d.Name
		}
		call.arguments.WriteString(d.Arguments)
	}
	if c.Usage != nil {
		s.usage = *c.Usage
	}
	if c.Finish != "" {
		s.finish = c.Finish
	}
}

// toolCalls lists the answer's calls in index order with ids minted here:
// the provider's ids are never trusted (some reuse or omit them).
func (s *streaming) toolCalls(newID func() string) []event.ToolCall {
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]event.ToolCall, 0, len(idx))
	for n, i := range idx {
		c := s.calls[i]
		args := c.arguments.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		out = append(out, event.ToolCall{CallID: newID(), Index: n, Name: c.name, Arguments: args})
	}
	return out
}

// transcript is what a model request is built from: the request without
// its messages (model, system prompt and tool specs, as the session's
// config makes them) and the session's messages in order, but for the
// oldest exchanges that cannot fit the context size (planTranscript),
// which are never read.
type transcript struct {
	base model.Request
	// budget is what the context size leaves for the messages once the
	// system prompt and tool specs are counted (fixedSize); it may be
	// less than zero.
	budget int
	rows   []transcriptRow
	// unsettled holds what the model is told about calls of ended turns
	// that have no result but of which more is known: that they never
	// ran, or what the person they waited on decided (unsettledOutputs).
	unsettled map[string]madeUpResult
	// omitted is how many request messages the exchanges left unread
	// stand for: the request says so first (buildRequest).
	omitted int
}

type transcriptRow struct {
	role, text, calls, callID, name string
	outcome                         string // a tool result's call's
}

// madeUpResult is what a call of an ended turn that has no result is
// sent instead (unsettledOutputs).
type madeUpResult struct {
	text string
	// elidable: a question's answers may be elided like an output; what
	// says the call did not run is kept whole (keptWhole).
	elidable bool
}

// keptWhole tells a stored result that elide keeps whole, and the size
// query counts whole: one that says a permission request stopped the
// call (a rule or the person declined it, with the person's message if
// any, or the request was cancelled). Elided, "you declined" would read
// as an output the call gave. The made-up NoResult and NotRun, and the
// permission results made up for waited calls, are kept whole too.
func keptWhole(outcome, text string) bool {
	return outcome == event.OutcomeDeclined || text == core.PermissionCancelledOutput
}

func (t *turn) readTranscript(tx storage.Tx) (transcript, error) {
	var tr transcript
	var rawConfig string
	if _, err := storage.QueryRow(tx, `SELECT config FROM sessions WHERE id = ?`, []any{t.x.SessionID()}, &rawConfig); err != nil {
		return tr, err
	}
	cfg, err := core.ParseSessionConfig(json.RawMessage(rawConfig))
	if err != nil {
		return tr, err
	}
	tr.base = model.Request{Model: t.r.model.Name(), System: t.r.cfg.system, Tools: t.r.tools.Specs()}
	applySessionConfig(&tr.base, cfg)
	tr.budget = t.r.cfg.contextBytes - fixedSize(tr.base)
	from, omitted, err := planTranscript(tx, t.x.SessionID(), tr.budget)
	if err != nil {
		return tr, err
	}
	tr.omitted = omitted
	// A kept assistant message's results come after it (a call settles
	// after its step began), so they are all at or past from. A result
	// stored there of a call left out (settled after the notice of a
	// resume that opens a kept exchange) is read but not sent:
	// buildRequest sends a result only after its call.
	res, err := tx.Query(`SELECT role, text, COALESCE(tool_calls, ''), COALESCE(tool_call_id, ''), COALESCE(name, ''),
		COALESCE((SELECT outcome FROM tool_calls WHERE id = m.tool_call_id), '') FROM messages m WHERE session_id = ? AND seq >= ? ORDER BY seq`, t.x.SessionID(), from)
	if err != nil {
		return tr, err
	}
	for res.Next() {
		var r transcriptRow
		if err := res.Scan(&r.role, &r.text, &r.calls, &r.callID, &r.name, &r.outcome); err != nil {
			return tr, err
		}
		tr.rows = append(tr.rows, r)
	}
	tr.unsettled, err = unsettledOutputs(tx, tr.rows)
	return tr, err
}

// unitSizes is, for a message m of a session (?1) but a tool result,
// without its text (octet_length reads a row's header): how many tool
// calls it made, and its size as the context size counts it with its tool
// outputs elided. An assistant message's size includes its calls'
// arguments and the results sent after it, found by id (ToolSettled's
// message is the call's id and ".result"), each as long as its
// ElidedMarker if it is longer (?2 is the marker's size without its
// number), but for those kept whole (keptWhole: declined, ?8, or the
// cancelled permission's text, ?9). A call without one is sent a result
// made up (unsettledOutputs), never elided but for a question's: NotRun
// for a call still in phase called (?5, counted at len(NotRun), ?6),
// NoResult for one that was executing (?4). A call that waited (phase
// ?3) is sent what its latest blocker's end says (waitOutput): a
// question's answers (elided if need be, so counted at most as the
// longest marker, ?7), NotRun for an approved permission (?10), the
// person's decline and message for a rejected one (?11 with the JSON
// reply's message, ?12 the text between them), the cancelled text (?13)
// for any other; NoResult without a blocker or for a sub-agent's (?14
// the question kind, ?15 the permission kind, ?16 approved, ?17
// rejected). The values are bound, not pasted into the text: a marker
// with a quote in it would break the query. Subqueries, not a join and
// GROUP BY: those sort the rows in a temporary table, and the index gives
// them in order.
const unitSizes = `(SELECT count(*) FROM tool_calls WHERE step_id = m.id),
	octet_length(m.text) + (SELECT COALESCE(sum(octet_length(c.arguments) + COALESCE(
		CASE WHEN c.outcome = ?8 OR r.text = ?9 THEN octet_length(r.text)
			ELSE min(octet_length(r.text), ?2 + length(octet_length(r.text))) END,
		CASE c.phase WHEN ?3 THEN COALESCE((SELECT CASE
				WHEN b.kind = ?14 THEN ?7
				WHEN b.kind != ?15 THEN ?4
				WHEN b.state = ?16 THEN ?6
				WHEN b.state = ?17 AND json_valid(b.reply) THEN ?11 +
					COALESCE(NULLIF(octet_length(json_extract(b.reply, '$.message')), 0) + ?12, 0)
				ELSE ?13 END
			FROM blockers b WHERE b.step_id = c.step_id AND b.call_id = c.id ORDER BY b.ordinal DESC LIMIT 1), ?4)
			WHEN ?5 THEN ?6 ELSE ?4 END)), 0)
		FROM tool_calls c LEFT JOIN messages r ON r.id = c.id || '.result' WHERE c.step_id = m.id)`

// transcriptSizes is a page of planTranscript's read: the messages of a
// session (?1) but tool results, newest first, before the one at seq ?18
// and rowid ?19 (ties on seq, which the projection never makes, go by
// rowid, as the index keeps them), at most ?20: each one's seq, rowid and
// role, and unitSizes. INDEXED BY: without statistics SQLite takes
// messages_by_session, which walks the tool results too, each read from
// the table to learn its role; messages_sent holds the others only and
// sorts just the ties (TestPlanTranscriptReadsByTheIndexes).
const transcriptSizes = `SELECT m.seq, m.rowid, m.role, ` + unitSizes + `
	FROM messages m INDEXED BY messages_sent WHERE m.session_id = ?1 AND m.role != 'tool' AND (m.seq, m.rowid) < (?18, ?19)
	ORDER BY m.seq DESC, m.rowid DESC LIMIT ?20`

// transcriptSizesArgs are the values unitSizes binds for a session.
func transcriptSizesArgs(sessionID string) []any {
	return []any{sessionID, markerSize, string(event.PhaseWaiting), len(NoResult),
		string(event.PhaseCalled), len(NotRun), markerSize + 19,
		event.OutcomeDeclined, core.PermissionCancelledOutput,
		len(NotRun), len(core.DeclinedByUser), len(core.DeclinedUserSaid), len(core.PermissionCancelledOutput),
		event.KindQuestion, event.KindPermission, core.BlockerApproved, core.BlockerRejected}
}

// requestMessages is how many request messages a session's transcript
// stands for (contextUnit.messages, summed): its messages but tool
// results, and a result for each of its tool calls. The projection
// stores a step's calls with its answer, whose id is the step's, so the
// session's calls are its messages' ones. Counted from the indexes alone
// (messages_sent, tool_calls_by_session), without reading a row.
const requestMessages = `SELECT (SELECT count(*) FROM messages WHERE session_id = ?1 AND role != 'tool')
	+ (SELECT count(*) FROM tool_calls WHERE session_id = ?1)`

// markerSize is the size of an ElidedMarker without its number.
var markerSize = len(ElidedMarker) - len("%d")

// The pages planTranscript reads: small first, as a request sends a few
// dozen of a long session's newest messages, then doubling, so that a
// read of n messages takes about log2(n) queries. Variables: a test reads
// pages of one and two, to meet every way a read ends at a page's end.
var firstSizesPage, lastSizesPage = 32, 1024

// planTranscript decides from the messages' sizes alone which of the
// oldest exchanges the request leaves out (fitting), so that
// a session whose log is far past the context size reads about as much as
// it sends. It returns the seq of the first message to read (0: all) and
// how many request messages the ones left out stand for, to fit budget
// bytes. It reads the sizes newest first, a page at a time, and stops
// once what it read is past the budget: no older exchange can be where
// the request begins (fitting). What it did not read is counted, not
// read (requestMessages).
func planTranscript(tx storage.Tx, sessionID string, budget int) (from int64, omitted int, err error) {
	f := fitting{budget: budget}
	// Above every seq and rowid, and bound as every host binds it: a
	// Durable Object's values are JS numbers, which refuse math.MaxInt64
	// (it would round), but hold 1<<62 exactly, core's open upper bound.
	seq, rowid := int64(1<<62), int64(1<<62)
	args := append(transcriptSizesArgs(sessionID), seq, rowid, 0)
	for limit := firstSizesPage; ; limit = min(2*limit, lastSizesPage) {
		args[17], args[18], args[19] = seq, rowid, limit
		res, err := tx.Query(transcriptSizes, args...)
		if err != nil {
			return 0, 0, err
		}
		for res.Next() {
			var role string
			var u contextUnit
			if err := res.Scan(&seq, &rowid, &role, &u.messages, &u.least); err != nil {
				return 0, 0, err
			}
			u.seq = seq
			u.messages++ // the message and a result for each call
			u.opens = role != event.RoleAssistant
			if !f.add(u, role == event.RoleUser) {
				var total int
				if _, err := storage.QueryRow(tx, requestMessages, []any{sessionID}, &total); err != nil {
					return 0, 0, err
				}
				from, omitted = f.decide(total)
				return from, omitted, nil
			}
		}
		if res.Len() < limit {
			from, omitted = f.decide(f.messages)
			return from, omitted, nil
		}
	}
}

// contextUnit is one message of a transcript as fitting the request to
// the context size sees it: an assistant message stands with the tool
// results sent after it.
type contextUnit struct {
	seq      int64
	messages int  // the request messages it stands for
	least    int  // its size with its tool outputs elided
	opens    bool // a prompt or notice: an exchange begins here
}

// What a request leaves out, to fit budget bytes once its tool outputs
// are all elided (outputs are elided before any exchange is left out), is
// the oldest exchanges (a prompt or notice and what follows it up to the
// next), whole, so that no tool call is parted from its result, which
// providers refuse; the current prompt's exchange (from the session's
// last user message on) always stays, even alone past the budget. A
// request that leaves out any makes room for the notice that says so, as
// long as it is with the count it will hold: no more is left out than
// needed. So the request begins at the oldest unit b of the session
// such that b is the first unit (nothing left out) and all of them fit,
// or b opens an exchange before the current prompt's and the units from
// b on fit with the notice of what the units before b stand for;
// else at the current prompt.
//
// fitting finds it reading the units newest first (add) and stops once
// those read are past the budget: an older b has at least those, and
// more, after it, so it cannot fit either.
type fitting struct {
	budget   int
	size     int // of the units read
	messages int // the units read stand for
	// kept tells the current prompt read: keep is it, with the units
	// after it.
	kept bool
	keep boundary
	// fits are the units read, older than keep, that open an exchange
	// and, with the units after them, fit without the notice: newest
	// first.
	fits []boundary
}

// boundary is a unit where a request may begin, with the size and the
// request messages of the units from it on.
type boundary struct {
	seq            int64
	size, messages int
}

// add reads the next unit, older than those read before, user telling a
// user prompt. It reports whether an older unit may still be where the
// request begins.
func (f *fitting) add(u contextUnit, user bool) bool {
	f.size += u.least
	f.messages += u.messages
	b := boundary{seq: u.seq, size: f.size, messages: f.messages}
	if !f.kept {
		f.kept, f.keep = user, b
		return !f.kept || f.size <= f.budget
	}
	if f.size > f.budget {
		return false
	}
	if u.opens {
		f.fits = append(f.fits, b)
	}
	return true
}

// decide is where the request begins and how many request messages the
// units before it stand for, total being those of the whole transcript:
// the oldest of fits that fits with the notice, else the current prompt.
// When the read reached the oldest unit and all it read fits, total is
// f.messages and the oldest is where the request begins: nothing is left
// out (from 0, as a session without a user prompt, whose units may all be
// read, is sent whole).
func (f *fitting) decide(total int) (from int64, omitted int) {
	begin := f.keep
	for i := len(f.fits) - 1; i >= 0; i-- {
		if b := f.fits[i]; b.size+omittedSize(total-b.messages) <= f.budget {
			begin = b
			break
		}
	}
	if !f.kept || total == f.messages && f.size <= f.budget {
		return 0, 0
	}
	if omitted = total - begin.messages; omitted == 0 {
		return 0, 0
	}
	return begin.seq, omitted
}

// unsettledOutputs finds, for the calls of the transcript that have no
// result (their turn ended first), those of which more is known than
// that, and what the model is told of each: a call not yet authorized
// never ran, and the model may ask for it again; a call that waited on a
// person reads as what the person decided (waitOutput). A call that was
// executing, or waited on a sub-agent (which may have done work), keeps
// NoResult. Only the few unanswered calls are looked up, by their ids.
func unsettledOutputs(tx storage.Tx, rows []transcriptRow) (map[string]madeUpResult, error) {
	answered := map[string]bool{}
	for _, r := range rows {
		if r.role == event.RoleTool {
			answered[r.callID] = true
		}
	}
	var out map[string]madeUpResult
	for _, r := range rows {
		if r.role != event.RoleAssistant || r.calls == "" {
			continue
		}
		var calls []event.ToolCall
		if err := json.Unmarshal([]byte(r.calls), &calls); err != nil {
			return nil, fmt.Errorf("decode tool calls: %w", err)
		}
		for _, c := range calls {
			if answered[c.CallID] {
				continue
			}
			var phase string
			found, err := storage.QueryRow(tx, `SELECT phase FROM tool_calls WHERE id = ?`, []any{c.CallID}, &phase)
			if err != nil {
				return nil, fmt.Errorf("read unsettled call %s: %w", c.CallID, err)
			}
			var made madeUpResult
			switch {
			case !found:
			case event.Phase(phase) == event.PhaseWaiting:
				if made, err = waitOutput(tx, c.CallID); err != nil {
					return nil, err
				}
			case event.Phase(phase) == event.PhaseCalled:
				made.text = NotRun
			}
			if made.text != "" {
				if out == nil {
					out = map[string]madeUpResult{}
				}
				out[c.CallID] = made
			}
		}
	}
	return out, nil
}

// waitOutput is the text for a waiting call of an ended turn, from the
// latest blocker it waited on (a re-resolved call asks afresh, so earlier
// ones are history): a question's answers or how it was cancelled
// (core.UnsettledQuestionOutput); for a permission request, that the call
// did not run, declined with the person's message after a reject with
// one (core.UnsettledPermissionOutput). "" for a call that waited on a
// sub-agent, which may have done work: it keeps NoResult. transcriptSizes
// counts the same.
func waitOutput(tx storage.Tx, callID string) (madeUpResult, error) {
	var kind, adapter, state, reason, request, reply string
	found, err := storage.QueryRow(tx, `SELECT kind, adapter, state, COALESCE(reason, ''), request, COALESCE(reply, '') FROM blockers
		WHERE step_id = (SELECT step_id FROM tool_calls WHERE id = ?1) AND call_id = ?1
		ORDER BY ordinal DESC LIMIT 1`, []any{callID}, &kind, &adapter, &state, &reason, &request, &reply)
	if err != nil {
		return madeUpResult{}, fmt.Errorf("read the blocker of call %s: %w", callID, err)
	}
	switch {
	case !found:
		return madeUpResult{}, nil
	case kind == event.KindQuestion:
		text, _ := core.UnsettledQuestionOutput(adapter, state, reason, json.RawMessage(request), json.RawMessage(reply))
		return madeUpResult{text: text, elidable: true}, nil
	case kind == event.KindPermission && state == core.BlockerApproved:
		return madeUpResult{text: NotRun}, nil // approved, but the turn ended before it ran
	case kind == event.KindPermission:
		return madeUpResult{text: core.UnsettledPermissionOutput(state, json.RawMessage(reply))}, nil
	}
	return madeUpResult{}, nil
}

// buildRequest makes the model request of a transcript. Tool results are
// placed right after the assistant message that asked for them, as
// providers require, even if a continuation notice came in between.
func (t *turn) buildRequest(tr transcript) (model.Request, error) {
	req := tr.base
	rows := tr.rows
	if tr.omitted > 0 {
		req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: fmt.Sprintf(OmittedNotice, tr.omitted), Notice: true})
	}
	results := map[string]model.Message{}
	whole := map[string]bool{} // the stored results kept whole, by call id
	keep := map[int]bool{}     // the results never elided, by index
	for _, r := range rows {
		if r.role == event.RoleTool {
			results[r.callID] = model.Message{Role: model.RoleTool, Text: r.text, ToolCallID: r.callID, Name: r.name}
			whole[r.callID] = keptWhole(r.outcome, r.text)
		}
	}
	for _, r := range rows {
		switch r.role {
		case event.RoleTool:
			continue
		case event.RoleAssistant:
			m := model.Message{Role: model.RoleAssistant, Text: r.text}
			var calls []event.ToolCall
			if r.calls != "" {
				if err := json.Unmarshal([]byte(r.calls), &calls); err != nil {
					return req, fmt.Errorf("decode tool calls: %w", err)
				}
			}
			for _, c := range calls {
				m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments})
			}
			req.Messages = append(req.Messages, m)
			for _, c := range calls {
				res, ok := results[c.CallID]
				if ok && whole[c.CallID] {
					keep[len(req.Messages)] = true
				}
				if !ok {
					// A call of an ended turn that never settled (its turn was
					// interrupted, or a reply cancelled it while it waited).
					// Providers refuse a tool call without a result, and the
					// model should know it did not complete, and whether it
					// ran, or how its question ended, if that is known.
					made, known := tr.unsettled[c.CallID]
					if !known {
						made.text = NoResult
					}
					keep[len(req.Messages)] = !made.elidable
					res = model.Message{Role: model.RoleTool, Text: made.text, ToolCallID: c.CallID, Name: c.Name}
				}
				req.Messages = append(req.Messages, res)
			}
		default: // user prompts and continuation notices
			req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: r.text, Notice: r.role == event.RoleNotice})
		}
	}
	elide(req.Messages, tr.budget, keep)
	return req, nil
}

// applySessionConfig lets a session override the system prompt and model
// and narrow the tools it is offered.
func applySessionConfig(req *model.Request, cfg core.SessionConfig) {
	if cfg.SystemPrompt != "" {
		req.System = cfg.SystemPrompt
	}
	if cfg.Model != "" {
		req.Model = cfg.Model
	}
	if cfg.Tools != nil {
		allowed := map[string]bool{}
		for _, name := range *cfg.Tools {
			allowed[name] = true
		}
		var kept []model.ToolSpec
		for _, spec := range req.Tools {
			if allowed[spec.Name] {
				kept = append(kept, spec)
			}
		}
		req.Tools = kept
	}
}

// fixedSize is what every request of a session sends besides its
// messages, and the context size counts first: the system prompt, and each
// tool spec's name, description and parameter schema.
func fixedSize(base model.Request) int {
	n := len(base.System)
	for _, spec := range base.Tools {
		n += len(spec.Name) + len(spec.Description) + len(spec.Schema)
	}
	return n
}

// omittedSize is the size of the OmittedNotice of a request that leaves
// out messages messages: none without any.
func omittedSize(messages int) int {
	if messages == 0 {
		return 0
	}
	return len(OmittedNotice) - len("%d") + len(strconv.Itoa(messages))
}

// elide replaces the oldest tool outputs with a marker until the request's
// text fits in budget bytes, so a long session keeps working. Prompts and
// answers are never elided: planTranscript left out the oldest whole
// exchanges instead, so that this fits unless the current prompt's
// exchange alone is past the budget. A request's size is the bytes of its
// messages' text and of their tool calls' arguments. The results that
// say the call did not run or has no result (keep: keptWhole's, and those
// made up for calls without one but a question's answers) are not elided
// either: a marker would hide that (it reads as an output the call gave);
// they are short, or hold the person's own message, which is no more
// elided than a prompt.
func elide(msgs []model.Message, budget int, keep map[int]bool) {
	total := 0
	for _, m := range msgs {
		total += len(m.Text)
		for _, c := range m.ToolCalls {
			total += len(c.Arguments)
		}
	}
	for i := range msgs {
		if total <= budget {
			return
		}
		if msgs[i].Role != model.RoleTool || keep[i] {
			continue
		}
		marker := fmt.Sprintf(ElidedMarker, len(msgs[i].Text))
		if len(marker) >= len(msgs[i].Text) {
			continue
		}
		total -= len(msgs[i].Text) - len(marker)
		msgs[i].Text = marker
	}
}

// ElidedMarker replaces a tool output elided to fit the context.
const ElidedMarker = "[tool output elided to fit the context window: %d bytes]"

// OmittedNotice is the user message a request starts with when the oldest
// exchanges of its session were left out to fit the context: %d is how
// many messages (prompts, answers, tool results) were left out.
const OmittedNotice = "[%d earlier messages of this conversation were left out to fit the context window]"
