package api

import (
	"context"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// permissions lists the pending permission requests of a session, and of
// its whole tree on a root's path.
func (h *TreeHandler) permissions(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	bs, err := t.Instance.Blockers(r.Context(), r.PathValue("id"), event.KindPermission)
	if err != nil {
		return err
	}
	writeJSON(w, httpmsg.StatusOK, map[string]any{"permissions": blockerBodies(bs)})
	return nil
}

// approve replies to a permission request (once, always or reject): first
// response wins (core.Instance.Reply), as for questions.
func (h *TreeHandler) approve(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	body, err := h.sessionBody(r, t)
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
	return writeResolution(w, res, err, "permission request")
}
