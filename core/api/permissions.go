package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
)

// permissions lists the pending permission requests of a session, and of
// its whole tree on a root's path.
func (h *TreeHandler) permissions(w http.ResponseWriter, r *http.Request, t *Tree) error {
	bs, err := t.Instance.Blockers(r.Context(), r.PathValue("id"), event.KindPermission)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"permissions": blockerBodies(bs)})
	return nil
}

// approve replies to a permission request (once, always or reject): first
// response wins (core.Instance.Reply), as for questions.
func (h *TreeHandler) approve(w http.ResponseWriter, r *http.Request, t *Tree) error {
	body, err := readBody(r, h.cfg.maxBody)
	if err != nil {
		return err
	}
	req, err := DecodeReply(body, event.KindPermission)
	if err != nil {
		return err
	}
	// The reply must commit even if the client goes away mid-call: it may
	// take the claim and start the continuation.
	res, err := t.Instance.Reply(context.WithoutCancel(r.Context()), r.PathValue("id"), r.PathValue("rid"),
		core.Reply{Kind: event.KindPermission, ResponseID: req.ResponseID, Decision: req.Reply, Message: req.Message})
	var conflict *core.ReplyConflict
	if errors.As(err, &conflict) {
		var cb conflictBody
		cb.Error.Type, cb.Error.Message = ErrConflict, "the permission request was already resolved by another reply or an interrupt; see winner"
		cb.Winner = resolutionOf(conflict.Winner)
		writeJSON(w, http.StatusConflict, cb)
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resolutionOf(res))
	return nil
}
