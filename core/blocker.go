package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// This file holds durable waits (DESIGN §9) as core sees them, generic over
// the blocker's kind: listing pending blockers, and the reply's
// first-response-wins compare-and-set, which, when it resolves the last
// blocker of a parked step, takes the claim and arms the wake-up in the
// same transaction (DESIGN §4 rule 1, as Admit does). What a reply means
// for its call is the kind's versioned Adapter's (question@1 here).

// Blocker states. Permissions will add their own resolved states.
const (
	BlockerPending   = "pending"
	BlockerAnswered  = "answered"
	BlockerCancelled = "cancelled"
)

// MaxResponseIDLen bounds a reply's response_id.
const MaxResponseIDLen = 200

// Blocker is one pending question or permission request.
type Blocker struct {
	ID        string
	Kind      string // event.KindQuestion
	Adapter   string // the continuation's versioned adapter, e.g. question@1
	SessionID string // the session whose call waits
	RootID    string
	PromptID  string
	StepID    string
	CallID    string
	Ordinal   int
	State     string
	Request   json.RawMessage // what is asked; its shape is the adapter's
	CreatedAt int64
	// CreatedSeq is the seq of the session.step.parked@1 that asked it.
	CreatedSeq int64
}

// Reply is a person's answer to one blocker.
type Reply struct {
	// Kind, when set, is the kind the reply is for (the route's): a blocker
	// of another kind is not found.
	Kind string `json:"-"`
	// ResponseID is the reply's idempotency key: required.
	ResponseID string `json:"-"`
	// Answers are a question's answers: one list per question asked, of the
	// choices picked (or the free text typed).
	Answers [][]string `json:"answers,omitempty"`
	// Cancel cancels the question: the turn ends as a user interrupt.
	Cancel bool `json:"cancel,omitempty"`
	// Message is free text for the model.
	Message string `json:"message,omitempty"`
	// Child is how a task blocker's sub-agent turn ended: written by the
	// child's turn terminal (taskwait.go), never by a client.
	Child *ChildResult `json:"child,omitempty"`
	// Decision is a permission reply: ReplyOnce, ReplyAlways or
	// ReplyReject (permissionwait.go).
	Decision string `json:"reply,omitempty"`
}

// Resolution is how a blocker was resolved: what a reply is answered with,
// and the winner a conflicting reply is shown.
type Resolution struct {
	BlockerID  string
	Kind       string
	SessionID  string
	State      string // BlockerAnswered, BlockerCancelled
	ResponseID string // empty when an interrupt cancelled it
	Reply      Reply  // the winning reply (zero for an interrupt's cancellation)
	Reason     string // cancelled: event.CancelReply, CancelSibling or CancelInterrupt
	ResolvedAt int64
	// Duplicate is set when this reply repeated the winner's response_id
	// and body: nothing was written, the original outcome stands.
	Duplicate bool
}

// ReplyConflict refuses a reply to a blocker already resolved otherwise: by
// another reply, by the same response_id with a different body, or by an
// interrupt. Winner is what resolved it.
type ReplyConflict struct {
	Winner Resolution
}

func (e *ReplyConflict) Error() string {
	return fmt.Sprintf("%s %s was already resolved (%s): %v", e.Winner.Kind, e.Winner.BlockerID, e.Winner.State, ErrConflict)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ReplyConflict) Unwrap() error { return ErrConflict }

// Verdict is what an adapter makes of a reply to a pending blocker.
type Verdict struct {
	State string     // the blocker's new state
	Event event.Type // the event that records it
	// EndTurn: the reply ends the turn like a user interrupt, cancelling
	// the step's other blockers (a cancelled question, a plain reject).
	EndTurn bool
	// SaveAlways: an always reply to a permission request saves its rules
	// and approves the step's other requests they now cover, in the same
	// transaction (permissionwait.go).
	SaveAlways bool
}

// Continuation is what a call whose blockers are all resolved does next.
type Continuation struct {
	// Run: the call's body runs now (an approved permission), written
	// executing first.
	Run bool
	// Otherwise the call settles without running, with this result.
	Outcome string // event.OutcomeOK, OutcomeError
	Output  string
}

// Adapter is one versioned continuation of a blocker kind. Its version is
// stored on the blocker, so a blocker parked by an older build is continued
// as that build would have.
type Adapter interface {
	// Name is kind@version, e.g. question@1.
	Name() string
	// Kind is the blocker kind, event.KindQuestion.
	Kind() string
	// Judge checks a reply against the request (an *Error with ErrInvalid
	// when it does not fit) and says what it resolves the blocker to.
	Judge(request json.RawMessage, r Reply) (Verdict, error)
	// CancelEvent records a cancellation by an interrupt or a sibling.
	CancelEvent() event.Type
	// Continue makes the call's continuation from its blockers, all
	// resolved, in ordinal order: the tool result the live path would have
	// produced.
	Continue(resolved []ResolvedBlocker) Continuation
}

// ResolvedBlocker is a blocker with its winning reply, for Continue.
type ResolvedBlocker struct {
	Blocker
	Reply Reply
}

// adapters are the continuations by name. Permissions add permission@1.
var adapters = map[string]Adapter{}

func registerAdapter(a Adapter) { adapters[a.Name()] = a }

// AdapterFor returns the adapter named name (kind@version).
func AdapterFor(name string) (Adapter, bool) {
	a, ok := adapters[name]
	return a, ok
}

// resolutionStates maps each answered / cancelled event type to the state
// it projects, for every kind.
var resolutionStates = map[event.Type]string{
	event.QuestionAnswered:    BlockerAnswered,
	event.QuestionCancelled:   BlockerCancelled,
	event.PermissionApproved:  BlockerApproved,
	event.PermissionRejected:  BlockerRejected,
	event.PermissionCancelled: BlockerCancelled,
}

// BlockerID is the deterministic id of a call's blocker: a resumed or
// rebuilt instance finds the same one. prefix is "q" for questions, "p"
// for permissions. Call ids are minted by revenant and URL-path safe.
func BlockerID(prefix, callID string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", prefix, callID, ordinal)
}

// Blockers lists the pending blockers of a session, and of its whole tree
// when sessionID is a root, oldest first; kind "" lists every kind.
func (inst *Instance) Blockers(ctx context.Context, sessionID, kind string) ([]Blocker, error) {
	var out []Blocker
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		out = nil
		if _, err := readSession(tx, sessionID); err != nil {
			return err
		}
		var err error
		out, err = pendingBlockers(tx, `(session_id = ?1 OR root_id = ?1) AND (?2 = '' OR kind = ?2)`, sessionID, kind)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list blockers of %s: %w", sessionID, err)
	}
	return out, nil
}

const blockerColumns = `id, kind, adapter, session_id, root_id, prompt_id, step_id, call_id, ordinal, state, request, created_at, created_seq`

func scanBlocker(rows *storage.Rows) (Blocker, error) {
	var b Blocker
	var req string
	err := rows.Scan(&b.ID, &b.Kind, &b.Adapter, &b.SessionID, &b.RootID, &b.PromptID, &b.StepID, &b.CallID, &b.Ordinal, &b.State, &req, &b.CreatedAt, &b.CreatedSeq)
	b.Request = json.RawMessage(req)
	return b, err
}

// pendingBlockers reads the pending blockers matching where, oldest first:
// in the tree's commit order (gseq) of the parks that asked them, since a
// tree-wide list spans sessions whose seqs are each their own; then in the
// order the step asked them.
func pendingBlockers(tx storage.Tx, where string, args ...any) ([]Blocker, error) {
	rows, err := tx.Query(`SELECT `+blockerColumns+` FROM blockers WHERE state = 'pending' AND `+where+`
		ORDER BY (SELECT gseq FROM events e WHERE e.session_id = blockers.session_id AND e.seq = blockers.created_seq),
		created_seq, session_id, call_id, ordinal`, args...)
	if err != nil {
		return nil, err
	}
	var out []Blocker
	for rows.Next() {
		b, err := scanBlocker(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// blockerRow is a blocker with its resolution, as stored.
type blockerRow struct {
	Blocker
	responseID, reply, reason string
	resolvedAt                int64
}

func readBlocker(tx storage.Tx, id string) (blockerRow, bool, error) {
	var b blockerRow
	rows, err := tx.Query(`SELECT `+blockerColumns+`, COALESCE(response_id, ''), COALESCE(reply, ''), COALESCE(reason, ''), COALESCE(resolved_at, 0) FROM blockers WHERE id = ?`, id)
	if err != nil || !rows.Next() {
		return b, false, err
	}
	var req string
	err = rows.Scan(&b.ID, &b.Kind, &b.Adapter, &b.SessionID, &b.RootID, &b.PromptID, &b.StepID, &b.CallID, &b.Ordinal, &b.State, &req, &b.CreatedAt, &b.CreatedSeq,
		&b.responseID, &b.reply, &b.reason, &b.resolvedAt)
	b.Request = json.RawMessage(req)
	return b, err == nil, err
}

// resolution is the row's resolution (meaningful once it is not pending).
func (b blockerRow) resolution() Resolution {
	res := Resolution{BlockerID: b.ID, Kind: b.Kind, SessionID: b.SessionID, State: b.State, ResponseID: b.responseID,
		Reason: b.reason, ResolvedAt: b.resolvedAt}
	if b.reply != "" {
		_ = json.Unmarshal([]byte(b.reply), &res.Reply) // written by encodeReply
	}
	res.Reply.Kind, res.Reply.ResponseID = b.Kind, b.responseID
	return res
}

func encodeReply(r Reply) (json.RawMessage, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode reply: %w", err)
	}
	return b, nil
}

// notFound is the answer for a blocker the path cannot reach.
func notFound(kind, id string) error {
	if kind == "" {
		kind = "blocker"
	}
	return &Error{Code: ErrNotFound, Msg: fmt.Sprintf("no pending %s %s in this session", kind, Clip(id))}
}

// Reply resolves a blocker, first response wins (DESIGN §9). sessionID is
// the path's session: the blocker's own or its root. The same ResponseID
// and body again returns the original outcome (Duplicate); anything else
// on a resolved blocker is a *ReplyConflict carrying the winner. A reply
// that does not fit the request is ErrInvalid, with nothing written.
//
// When the reply resolves the last pending blocker of its step, the same
// transaction takes the claim and arms the wake-up, and the continuation
// starts here with cause "resolution". A reply that ends the turn (a
// cancelled question) cancels the step's other blockers and ends the turn
// interrupted{user}, cancelling queued prompts, in that transaction.
func (inst *Instance) Reply(ctx context.Context, sessionID, blockerID string, r Reply) (Resolution, error) {
	switch {
	case strings.TrimSpace(r.ResponseID) == "":
		return Resolution{}, invalid("reply: response_id is required")
	case len(r.ResponseID) > MaxResponseIDLen:
		return Resolution{}, invalid("reply: response_id is longer than %d bytes", MaxResponseIDLen)
	case r.Child != nil:
		return Resolution{}, invalid("reply: child is a sub-agent's result, written by its turn's end, never by a reply")
	}
	body, err := encodeReply(r)
	if err != nil {
		return Resolution{}, err
	}
	var ended string // a session whose turn the reply ended
	defer func() {
		if ended != "" {
			inst.interruptChildren(ctx, ended) // job.go: its running foreground children
			// A child's ended turn resolved its parent's waiting call and
			// took the parent's claim (taskwait.go): go on here, as after
			// Interrupt, rather than at the next wake-up.
			inst.claimMu.Lock()
			inst.afterChildTurn(ctx, ended)
			inst.claimMu.Unlock()
		}
	}()
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	// Wake rule 1, as in Admit: armed before the transaction that may take
	// the claim, under the claim lock.
	w := inst.claimingWrite(ctx)
	var res Resolution
	var startHere, endTurn bool
	var owner string
	err = w.run(ctx, func(t *txw) error {
		res, startHere, endTurn, owner = Resolution{}, false, false, ""
		b, found, err := readBlocker(t, blockerID)
		if err != nil {
			return err
		}
		if !found || (b.SessionID != sessionID && b.RootID != sessionID) || (r.Kind != "" && b.Kind != r.Kind) {
			return notFound(r.Kind, blockerID)
		}
		owner = b.SessionID
		if b.State != BlockerPending {
			winner := b.resolution()
			if b.responseID == r.ResponseID && b.reply == string(body) {
				res, res.Duplicate = winner, true
				return nil
			}
			return &ReplyConflict{Winner: winner}
		}
		ad, ok := AdapterFor(b.Adapter)
		if !ok {
			return fmt.Errorf("reply to %s: no adapter %q in this build", b.ID, b.Adapter)
		}
		v, err := ad.Judge(b.Request, r)
		if err != nil {
			return err
		}
		if _, err := t.append(b.SessionID, v.Event, event.Resolution{BlockerID: b.ID, CallID: b.CallID, StepID: b.StepID,
			ResponseID: r.ResponseID, Reply: body, Reason: reasonFor(v)}); err != nil {
			return err
		}
		if v.SaveAlways {
			if err := t.saveAlways(b); err != nil {
				return err
			}
		}
		if v.EndTurn && b.Kind == event.KindPermission {
			if err := t.declineCall(b); err != nil {
				return err
			}
		}
		if v.EndTurn {
			endTurn = true
			if err := t.cancelBlockers(b.SessionID, `step_id = ?2`, event.CancelSibling, b.StepID); err != nil {
				return err
			}
			// No execution runs a parked turn: its last one ended with the park.
			if err := t.interruptTurn(b.SessionID, interruption("", b.PromptID, event.ReasonUser, event.CutInterrupted, nil), event.ReasonUser); err != nil {
				return err
			}
		} else {
			var left bool
			if _, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM blockers WHERE step_id = ? AND state = 'pending')`, []any{b.StepID}, &left); err != nil {
				return err
			}
			if !left {
				taken, err := t.claims().take(b.SessionID, t.now())
				if err != nil {
					return err
				}
				startHere = taken
			}
		}
		after, _, err := readBlocker(t, b.ID)
		res = after.resolution()
		return err
	})
	if err != nil {
		var conflict *ReplyConflict
		if errors.As(err, &conflict) {
			return Resolution{}, conflict
		}
		return Resolution{}, fmt.Errorf("reply to %s: %w", blockerID, err)
	}
	if startHere {
		inst.startLocked(ctx, owner, event.CauseResolution)
	}
	if endTurn {
		ended = owner
	}
	return res, nil
}

func reasonFor(v Verdict) string {
	if v.State == BlockerCancelled {
		return event.CancelReply
	}
	return ""
}

// cancelBlockers cancels the session's pending blockers matching where
// (whose parameters start at ?2; ?1 is the session), each with its kind's
// cancel event. Shutdown, eviction and kills never come here: only a reply
// that ends the turn and a user's interrupt or replacing prompt.
func (t *txw) cancelBlockers(sessionID, where, reason string, args ...any) error {
	bs, err := pendingBlockers(t, `session_id = ?1 AND `+where, append([]any{sessionID}, args...)...)
	if err != nil {
		return fmt.Errorf("cancel blockers: %w", err)
	}
	for _, b := range bs {
		ad, ok := AdapterFor(b.Adapter)
		if !ok {
			return fmt.Errorf("cancel blocker %s: no adapter %q in this build", b.ID, b.Adapter)
		}
		if _, err := t.append(sessionID, ad.CancelEvent(), event.Resolution{BlockerID: b.ID, CallID: b.CallID, StepID: b.StepID, Reason: reason}); err != nil {
			return err
		}
	}
	return nil
}

// parked reports whether the session waits on a pending blocker.
func (t *txw) parked(sessionID string) (bool, error) {
	var waiting bool
	_, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM blockers WHERE session_id = ? AND state = 'pending')`, []any{sessionID}, &waiting)
	return waiting, err
}

// CallBlockers reads a waiting call's blockers in ordinal order (then the
// order they were asked in), with the
// winning replies of those resolved, for the driver's continuation; pending
// reports whether one still waits.
func CallBlockers(tx storage.Tx, callID string) (bs []ResolvedBlocker, pending bool, err error) {
	rows, err := tx.Query(`SELECT id FROM blockers WHERE call_id = ? ORDER BY ordinal, created_seq, id`, callID)
	if err != nil {
		return nil, false, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, false, err
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		b, _, err := readBlocker(tx, id)
		if err != nil {
			return nil, false, err
		}
		if b.State == BlockerPending {
			pending = true
		}
		bs = append(bs, ResolvedBlocker{Blocker: b.Blocker, Reply: b.resolution().Reply})
	}
	return bs, pending, nil
}
