package core

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/storage"
)

// This file holds permission requests as durable waits (DESIGN §9): the
// permission@1 adapter, the request it reads, and the tree's saved
// `always` rules. Deciding a call (allow / ask / deny) is package
// core/permission's; asking and continuing is the runner's, through the
// generic blocker machinery of blocker.go.

// PermissionAdapter names the permission continuation this build writes.
const PermissionAdapter = "permission@1"

// Permission replies.
const (
	ReplyOnce   = "once"   // approve this request
	ReplyAlways = "always" // approve, and save an allow rule for its resources
	ReplyReject = "reject" // decline: the call fails; without a message the turn ends
)

// Blocker states of permission requests (besides pending and cancelled).
const (
	BlockerApproved = "approved"
	BlockerRejected = "rejected"
)

// MaxReplyMessage bounds a reply's message.
const MaxReplyMessage = 16 << 10

// PermissionRequest is what a permission blocker asks (its request JSON):
// may Action run with Arguments, touching Resources (those the rules ask
// about; an approval covers exactly these), as Rule decided? Final are
// those of Resources an operator's final rule asks about: an `always`
// reply approves them for this call only and saves no rule for them.
type PermissionRequest struct {
	Action    string          `json:"action"`
	Resources []string        `json:"resources"`
	Final     []string        `json:"final,omitempty"`
	Arguments json.RawMessage `json:"arguments"`
	Rule      permission.Rule `json:"rule"`
	Source    string          `json:"source"`
}

// saveable are the resources an `always` reply to the request saves a
// rule for: those no final rule asks about.
func (r PermissionRequest) saveable() []string {
	return slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool { return slices.Contains(r.Final, res) })
}

// permissionV1 is the permission@1 adapter: an approved request lets its
// call run (written executing first); a rejected one settles it declined,
// with the person's message as feedback when one was given.
type permissionV1 struct{}

func init() { registerAdapter(permissionV1{}) }

func (permissionV1) Name() string            { return PermissionAdapter }
func (permissionV1) Kind() string            { return event.KindPermission }
func (permissionV1) CancelEvent() event.Type { return event.PermissionCancelled }

func (permissionV1) Judge(_ json.RawMessage, r Reply) (Verdict, error) {
	switch {
	case r.Answers != nil || r.Cancel:
		return Verdict{}, invalid(`reply: a permission takes "reply": "once", "always" or "reject", not answers or cancel`)
	case len(r.Message) > MaxReplyMessage:
		return Verdict{}, invalid("reply: message is longer than %d bytes", MaxReplyMessage)
	}
	switch r.Decision {
	case ReplyOnce, ReplyAlways:
		if r.Message != "" {
			return Verdict{}, invalid("reply: a message goes with reject only (it is the model's feedback)")
		}
		return Verdict{State: BlockerApproved, Event: event.PermissionApproved, SaveAlways: r.Decision == ReplyAlways}, nil
	case ReplyReject:
		// Without a message the person stops the turn; with one, only this
		// call fails and the model reads why.
		return Verdict{State: BlockerRejected, Event: event.PermissionRejected, EndTurn: r.Message == ""}, nil
	case "":
		return Verdict{}, invalid(`reply: "reply" is required: "once", "always" or "reject"`)
	}
	return Verdict{}, invalid(`reply: "reply" must be "once", "always" or "reject", not %q`, Clip(r.Decision))
}

// DeclinedByUser is the start of what the model reads about a call the
// person rejected.
const DeclinedByUser = "The user declined this call; it did not run."

// DeclinedUserSaid comes between DeclinedByUser and the person's message,
// when the reject has one.
const DeclinedUserSaid = " The user said: "

// Continue decides from the call's latest request (a re-resolved call asks
// afresh with the next ordinal, so earlier ones are history).
func (permissionV1) Continue(resolved []ResolvedBlocker) Continuation {
	last := resolved[len(resolved)-1]
	switch last.State {
	case BlockerApproved:
		return Continuation{Run: true}
	case BlockerRejected:
		out := DeclinedByUser
		if last.Reply.Message != "" {
			out += DeclinedUserSaid + last.Reply.Message
		}
		return Continuation{Outcome: event.OutcomeDeclined, Output: out}
	}
	return Continuation{Outcome: event.OutcomeError, Output: PermissionCancelledOutput}
}

// PermissionCancelledOutput is what the model reads about a call whose
// permission request was cancelled: it never ran.
const PermissionCancelledOutput = "The permission request was cancelled; the call did not run."

// UnsettledPermissionOutput is what a later turn's model reads about a
// call of an ended turn whose permission request was rejected or
// cancelled, the turn ending before the call's continuation: a reject
// with a message (which leaves the turn going) followed by an interrupt
// or another call's plain reject reads as the continuation would have
// read it, the person's message included; anything else as cancelled.
// reply is the blocker's stored reply (empty for an interrupt's
// cancellation).
func UnsettledPermissionOutput(state string, reply json.RawMessage) string {
	var r Reply
	if state != BlockerRejected || json.Unmarshal(reply, &r) != nil {
		return PermissionCancelledOutput
	}
	return permissionV1{}.Continue([]ResolvedBlocker{{Blocker: Blocker{State: state}, Reply: r}}).Output
}

// SavedRules reads the tree's saved `always` rules, oldest first.
func SavedRules(tx storage.Tx) ([]permission.Rule, error) {
	rows, err := tx.Query(`SELECT action, resource, decision, exact FROM permission_rules ORDER BY saved_at, id`)
	if err != nil {
		return nil, fmt.Errorf("read saved permission rules: %w", err)
	}
	var out []permission.Rule
	for rows.Next() {
		var r permission.Rule
		var d string
		if err := rows.Scan(&r.Action, &r.Resource, &d, &r.Exact); err != nil {
			return nil, fmt.Errorf("read saved permission rules: %w", err)
		}
		r.Decision = permission.Decision(d)
		out = append(out, r)
	}
	return out, nil
}

// saveAlways records the rules an `always` reply to b saves, then approves
// the other pending permission requests of b's step that the policy now
// allows entirely: the whole policy the runner would decide them by now
// (the operator's rules, a final one included, the session's, the tree's
// saved ones), not the saved rules alone, so a rule saved before the
// operator made a rule final approves nothing that rule asks about, even
// in a request stored before requests named their final resources. A
// request that names a final resource is never approved by another's
// reply, whatever the rules say now.
func (t *txw) saveAlways(b blockerRow) error {
	var req PermissionRequest
	if err := json.Unmarshal(b.Request, &req); err != nil {
		return fmt.Errorf("read permission request %s: %w", b.ID, err)
	}
	for i, r := range permission.AlwaysRules(req.Action, req.saveable()) {
		if _, err := t.append(b.SessionID, event.PermissionRuleSaved, event.RuleSaved{
			RuleID: fmt.Sprintf("%s-%d", b.ID, i), BlockerID: b.ID, Action: r.Action, Resource: r.Resource, Decision: string(r.Decision), Exact: r.Exact}); err != nil {
			return err
		}
	}
	saved, err := SavedRules(t)
	if err != nil {
		return err
	}
	sess, err := readSession(t, b.SessionID)
	if err != nil {
		return err
	}
	scfg, err := ParseSessionConfig(sess.Config)
	if err != nil {
		return err
	}
	var base []permission.Rule
	if o, ok := t.w.inst.driver.(OperatorRules); ok {
		base = o.OperatorPermissions()
	}
	policy := permission.Policy{Config: base, Session: scfg.Permissions, Saved: saved}
	others, err := pendingBlockers(t, `step_id = ? AND kind = ? AND id != ?`, b.StepID, event.KindPermission, b.ID)
	if err != nil {
		return err
	}
	for _, o := range others {
		var oreq PermissionRequest
		if err := json.Unmarshal(o.Request, &oreq); err != nil {
			return fmt.Errorf("read permission request %s: %w", o.ID, err)
		}
		if len(oreq.Final) == 0 && !slices.ContainsFunc(oreq.Resources, func(res string) bool {
			return policy.Decide(oreq.Action, permission.Ask, []string{res}).Decision != permission.Allow
		}) {
			if _, err := t.append(o.SessionID, event.PermissionApproved, event.Resolution{BlockerID: o.ID, CallID: o.CallID, StepID: o.StepID,
				Reason: event.ApprovedAlways}); err != nil {
				return err
			}
		}
	}
	return nil
}

// OperatorRules is a Driver that decides calls by the operator's
// permission rules (runner.Runner): an `always` reply approves another
// request only if they, with the session's and the saved rules, allow it.
// A driver without them is judged by the session's and saved rules alone.
type OperatorRules interface {
	OperatorPermissions() []permission.Rule
}

// declineCall settles the call of a rejected request as declined, in the
// reply's transaction: a plain reject ends the turn, and the call must not
// stay waiting behind it.
func (t *txw) declineCall(b blockerRow) error {
	_, err := t.append(b.SessionID, event.ToolSettled, event.Settled{CallID: b.CallID, Outcome: event.OutcomeDeclined, Output: DeclinedByUser})
	return err
}
