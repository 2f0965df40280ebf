package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/digest"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// PromptInput is a prompt a client submits.
type PromptInput struct {
	// ClientID is the client's idempotency key; empty means no
	// deduplication.
	ClientID string
	Text     string
	// Mode is event.ModeQueue (default) or event.ModeReplace, which first
	// interrupts the current turn and cancels the queue (reason superseded).
	Mode string
}

// Admission is the result of admitting a prompt.
type Admission struct {
	PromptID string
	// Duplicate is true when ClientID named an earlier admission with the
	// same body; PromptID is then the first admission's.
	Duplicate bool
}

// Admit records a prompt, its claim and the wake-up before returning
// (DESIGN §6.1), then starts its turn here if none runs. Reusing a ClientID
// with the same body returns the first admission; with another body,
// ErrConflict.
func (inst *Instance) Admit(ctx context.Context, sessionID string, in PromptInput) (Admission, error) {
	if in.Mode == "" {
		in.Mode = event.ModeQueue
	}
	if strings.TrimSpace(in.Text) == "" {
		return Admission{}, invalid("admit prompt: empty text")
	}
	if in.Mode != event.ModeQueue && in.Mode != event.ModeReplace {
		return Admission{}, invalid("admit prompt: mode %q", Clip(in.Mode))
	}
	if p := noticeIDPrefix(sessionID); strings.HasPrefix(in.ClientID, p) {
		return Admission{}, invalid("admit prompt: id %q is reserved: ids that begin with %q name the notices of this tree's background sub-agents", Clip(in.ClientID), p)
	}
	hash := bodyHash(in)
	if in.ClientID != "" {
		// A retried replace must not interrupt the turn its first admission
		// started, so duplicates are answered before anything else. A retry
		// racing its first delivery can miss it here: the interrupt looks
		// again under the claim lock (replacing).
		if a, found, err := inst.findAdmission(ctx, sessionID, in.ClientID, hash); err != nil || found {
			return a, err
		}
	}
	if in.Mode == event.ModeReplace {
		// Committed before the admission: if the process dies in between, the
		// client got no answer and retries with the same id, which then
		// interrupts nothing and admits. Not cancelled with the caller.
		rp := &replacing{clientID: in.ClientID, hash: hash}
		if _, err := inst.interrupt(context.WithoutCancel(ctx), sessionID, event.ReasonSuperseded, rp, ""); err != nil {
			if errors.Is(err, errAdmitted) {
				return rp.admitted, nil
			}
			return Admission{}, fmt.Errorf("admit prompt: replace: %w", err)
		}
	}

	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	// Wake rule 1: the wake-up is armed before the claim commits, under the
	// claim lock, so a wake that fires in between waits for the commit and
	// then sees the claim.
	w := inst.claimingWrite(ctx)
	var a Admission
	var startHere bool
	err := w.run(ctx, func(t *txw) error {
		a, startHere = Admission{}, false
		if err := t.requireSession(sessionID); err != nil {
			return err
		}
		if in.ClientID != "" {
			found, err := t.admissionByClient(sessionID, in.ClientID, hash, &a)
			if err != nil || found {
				return err
			}
		}
		// After the duplicate check: a retry of an admitted prompt gets its
		// 202 however full the queue is.
		if err := t.queueRoom(sessionID, inst.cfg.queueCap); err != nil {
			return err
		}
		a.PromptID = t.id()
		if _, err := t.append(sessionID, event.PromptAdmitted, event.Admitted{PromptID: a.PromptID, ClientID: in.ClientID, Text: in.Text, Mode: in.Mode, BodyHash: hash}); err != nil {
			return err
		}
		// A parked turn is not promoted past its blockers: the prompt
		// waits in the queue, unclaimed, until the turn ends (DESIGN §9).
		waiting, err := t.parked(sessionID)
		if err != nil || waiting {
			return err
		}
		taken, err := t.claims().take(sessionID, t.now())
		if err != nil {
			return err
		}
		startHere = taken
		return nil
	})
	if err != nil {
		return Admission{}, fmt.Errorf("admit prompt: %w", err)
	}
	if startHere {
		inst.startLocked(ctx, sessionID, event.CausePrompt)
	}
	return a, nil
}

func (inst *Instance) findAdmission(ctx context.Context, sessionID, clientID, hash string) (Admission, bool, error) {
	var a Admission
	var found bool
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		var err error
		found, err = (&txw{Tx: tx}).admissionByClient(sessionID, clientID, hash, &a)
		return err
	})
	if err != nil {
		return a, false, fmt.Errorf("admit prompt: %w", err)
	}
	return a, found, nil
}

func (t *txw) admissionByClient(sessionID, clientID, hash string, a *Admission) (bool, error) {
	var id, stored string
	found, err := storage.QueryRow(t, `SELECT id, body_hash FROM prompts WHERE session_id = ? AND client_id = ?`, []any{sessionID, clientID}, &id, &stored)
	if err != nil || !found {
		return false, err
	}
	if stored != hash {
		return false, &Error{Code: ErrConflict, Msg: fmt.Sprintf("prompt id %q was already used with a different body", Clip(clientID))}
	}
	*a = Admission{PromptID: id, Duplicate: true}
	return true, nil
}

// queueRoom is ErrQueueFull when the session holds limit prompts or more
// that have not ended (queued, or running their turn, parked included).
func (t *txw) queueRoom(sessionID string, limit int) error {
	var n int
	if _, err := storage.QueryRow(t, `SELECT count(*) FROM prompts WHERE session_id = ? AND state IN (?, ?)`,
		[]any{sessionID, string(PromptQueued), string(PromptRunning)}, &n); err != nil {
		return fmt.Errorf("count prompts: %w", err)
	}
	if n >= limit {
		return &Error{Code: ErrQueueFull, Msg: fmt.Sprintf("the session already holds %d prompts that have not ended (queued or running), the most it takes; send this one again once a turn has ended", n)}
	}
	return nil
}

func bodyHash(in PromptInput) string {
	h := digest.New()
	h.Write([]byte(in.Mode))
	h.Write([]byte{0})
	h.Write([]byte(in.Text))
	return digest.Hex(h.Sum(nil))
}

// startLocked starts the session's next turn here (or continues its
// running one, with cause) if its claim has no execution yet and none runs
// here. The caller holds claimMu. A claim whose execution died is
// recovery's to decide, not this path's.
func (inst *Instance) startLocked(ctx context.Context, sessionID, cause string) {
	var p *plan
	w := inst.newWrite()
	w.locked = true
	w.before = func(int) error {
		if inst.isClosed() {
			return errNothing
		}
		if x := inst.runningExecution(sessionID); x != nil {
			x.startWanted = true // x's end starts it (under claimMu, as here)
			return errNothing
		}
		return nil
	}
	err := w.run(ctx, func(t *txw) error {
		p = nil
		execID, found, err := t.claims().execution(sessionID)
		if err != nil || !found || execID != "" {
			return err
		}
		p, err = t.beginExecution(sessionID, cause)
		return err
	})
	if errors.Is(err, errNothing) {
		return
	}
	if err != nil {
		inst.log.Warn("start execution failed; the wake-up will retry", "session", sessionID, "err", err)
		return
	}
	inst.launch(p)
}
