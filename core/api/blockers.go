package api

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// blockerBody is one pending blocker in a snapshot or a list; request is
// the kind's (a question's: {"questions": […]}).
type blockerBody struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	SessionID  string          `json:"session_id"`
	PromptID   string          `json:"prompt_id"`
	StepID     string          `json:"step_id"`
	CallID     string          `json:"call_id"`
	Ordinal    int             `json:"ordinal"`
	Request    json.RawMessage `json:"request"`
	CreatedAt  int64           `json:"created_at"`
	CreatedSeq int64           `json:"created_seq"`
}

func blockerBodies(bs []core.Blocker) []blockerBody {
	out := make([]blockerBody, 0, len(bs))
	for _, b := range bs {
		out = append(out, blockerBody{ID: b.ID, Kind: b.Kind, SessionID: b.SessionID, PromptID: b.PromptID, StepID: b.StepID,
			CallID: b.CallID, Ordinal: b.Ordinal, Request: b.Request, CreatedAt: b.CreatedAt, CreatedSeq: b.CreatedSeq})
	}
	return out
}

// resolutionBody is how a blocker was resolved: a reply's 200, and the
// winner in a 409.
type resolutionBody struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	SessionID  string     `json:"session_id"`
	State      string     `json:"state"`
	ResponseID string     `json:"response_id,omitempty"`
	Reply      *replyBody `json:"reply,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	ResolvedAt int64      `json:"resolved_at"`
	Duplicate  bool       `json:"duplicate,omitempty"`
}

type replyBody struct {
	Reply   string     `json:"reply,omitempty"` // a permission's: once, always, reject
	Answers [][]string `json:"answers,omitempty"`
	Cancel  bool       `json:"cancel,omitempty"`
	Message string     `json:"message,omitempty"`
}

func resolutionOf(r core.Resolution) resolutionBody {
	body := resolutionBody{ID: r.BlockerID, Kind: r.Kind, SessionID: r.SessionID, State: r.State, ResponseID: r.ResponseID,
		Reason: r.Reason, ResolvedAt: r.ResolvedAt, Duplicate: r.Duplicate}
	if r.ResponseID != "" {
		body.Reply = &replyBody{Reply: r.Reply.Decision, Answers: r.Reply.Answers, Cancel: r.Reply.Cancel, Message: r.Reply.Message}
	}
	return body
}

// conflictBody is a 409 to a reply: the error and the winner.
type conflictBody struct {
	ErrorBody
	Winner resolutionBody `json:"winner"`
}

// questions lists the pending questions of a session, and of its whole
// tree on a root's path.
func (h *TreeHandler) questions(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	bs, err := t.Instance.Blockers(r.Context(), r.PathValue("id"), event.KindQuestion)
	if err != nil {
		return err
	}
	writeJSON(w, httpmsg.StatusOK, map[string]any{"questions": blockerBodies(bs)})
	return nil
}

// answer replies to a question: first response wins (core.Instance.Reply).
func (h *TreeHandler) answer(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	body, err := h.sessionBody(r, t)
	if err != nil {
		return err
	}
	req, err := DecodeReply(body, event.KindQuestion)
	if err != nil {
		return err
	}
	answers, err := decodeAnswers(req.Answers)
	if err != nil {
		return err
	}
	// The reply must commit even if the client goes away mid-call: it may
	// take the claim and start the continuation.
	res, err := t.Instance.Reply(context.WithoutCancel(r.Context()), r.PathValue("id"), r.PathValue("qid"),
		core.Reply{Kind: event.KindQuestion, ResponseID: req.ResponseID, Answers: answers, Cancel: req.Cancel, Message: req.Message})
	return writeResolution(w, res, err, "question")
}

// writeResolution answers a reply: the resolution (200), a conflict with
// its winner (409), or err.
func writeResolution(w httpmsg.ResponseWriter, res core.Resolution, err error, what string) error {
	var conflict *core.ReplyConflict
	if errors.As(err, &conflict) {
		var cb conflictBody
		cb.Error.Type, cb.Error.Message = ErrConflict, "the "+what+" was already resolved by another reply or an interrupt; see winner"
		cb.Winner = resolutionOf(conflict.Winner)
		writeJSON(w, httpmsg.StatusConflict, cb)
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, httpmsg.StatusOK, resolutionOf(res))
	return nil
}

// decodeAnswers reads one answer per question: a list of strings, or one
// string as a shorthand for a list of one.
func decodeAnswers(raw []json.RawMessage) ([][]string, error) {
	if raw == nil {
		return nil, nil
	}
	out := make([][]string, len(raw))
	for i, a := range raw {
		var one string
		if err := json.Unmarshal(a, &one); err == nil {
			out[i] = []string{one}
			continue
		}
		if err := json.Unmarshal(a, &out[i]); err != nil || out[i] == nil {
			return nil, fail(ErrInvalidRequest, "each answer must be a string or an array of strings")
		}
	}
	return out, nil
}
