package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/storage"
)

// TreeDeps are the per-tree handler's collaborators; Clock is required.
type TreeDeps struct {
	Clock core.Clock   // heartbeats of event streams
	Log   *logs.Logger // nil discards
	// Panicked, if set, is told of a route's panic once its 500 is
	// written, as DirectoryDeps.Panicked.
	Panicked func(route string)
}

// TreeHandler serves the routes of one tree: every /v1/sessions/{id}/…
// route (snapshot, prompt, interrupt, events, permissions, questions) for
// a tree already authorized for the caller (Tree). It knows nothing of
// other trees, of identities or of an index: the host that composes it
// with a Directory (New, host.GuestHandler, a Durable Object's front) did
// that before.
type TreeHandler struct {
	deps   TreeDeps
	cfg    Config
	log    *logs.Logger
	mux    *route.Mux // matches tree routes; ServeTree runs them
	routes map[string]treeFunc

	closing chan struct{}
	once    sync.Once

	streamsMu sync.Mutex
	streams   map[string][]chan struct{} // open event streams by root id, oldest first (Config.streamLimit)
}

// treeFunc serves one tree route; its error is the answer.
type treeFunc func(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error

// NewTreeHandler returns the per-tree handler.
func NewTreeHandler(deps TreeDeps, cfg Config) (*TreeHandler, error) {
	if deps.Clock == nil {
		return nil, errors.New("new api tree handler: Clock is required")
	}
	if err := cfg.checkPageSizes(); err != nil {
		return nil, fmt.Errorf("new api tree handler: %w", err)
	}
	h := &TreeHandler{deps: deps, cfg: cfg, log: orDiscard(deps.Log), mux: &route.Mux{}, closing: make(chan struct{}),
		streams: map[string][]chan struct{}{}}
	h.routes = map[string]treeFunc{
		"GET /v1/sessions/{id}":                    h.snapshot,
		"POST /v1/sessions/{id}/prompt":            h.prompt,
		"POST /v1/sessions/{id}/interrupt":         h.interrupt,
		"GET /v1/sessions/{id}/events":             h.events,
		"GET /v1/sessions/{id}/permissions":        h.permissions,
		"POST /v1/sessions/{id}/permissions/{rid}": h.approve,
		"GET /v1/sessions/{id}/questions":          h.questions,
		"POST /v1/sessions/{id}/questions/{qid}":   h.answer,
	}
	for pattern := range h.routes {
		h.mux.HandleFunc(pattern, nil)
	}
	return h, nil
}

// ServeTree serves r, a request for one of t's routes, for t.Principal.
// A session of another tree is 404 (no such session); a request that is
// not a tree route is answered as no route (Unrouted).
func (h *TreeHandler) ServeTree(w httpmsg.ResponseWriter, r *httpmsg.Request, t Tree) {
	match, ok := h.mux.Match(r.Method, r.URL.EscapedPath())
	fn := h.routes[match.Pattern]
	if !ok || fn == nil {
		Unrouted(w, r)
		return
	}
	// Matched, not dispatched, so that the route is handed its Tree.
	match.SetPathValues(r)
	h.run(w, r, match.Pattern, fn, &t)
}

// run serves one tree route for t: a session outside the tree is 404, the
// route's error is the answer (a tree deleted under the request: 404,
// deletedUnder), a panic a logged 500.
func (h *TreeHandler) run(w httpmsg.ResponseWriter, r *httpmsg.Request, pattern string, fn treeFunc, t *Tree) {
	handle(h.log, pattern, h.deps.Panicked, func(w httpmsg.ResponseWriter, r *httpmsg.Request) error {
		if root(r.PathValue("id")) != t.RootID {
			return fail(ErrNotFound, "no such session")
		}
		return deletedUnder(r, t, fn(w, r, t))
	})(w, r)
}

// deletedUnder is err, the error of a route of t, unless err is a 503
// unavailable (the tree's instance closed under the request, say) and the
// tree is gone: a delete took it, and the request is 404, as it would be
// sent again, not a 503 that asks for a retry. Next (the local server's,
// serving trees in process) tells a delete from a restart: it waits for a
// delete under way to end and finds no tree, while a stopping host, a
// delete that failed (the tree stays) or a superseded instance keep the
// 503, which a retry resolves. A host without Next answers the 503.
//
// Only an instance that stopped asks: another 503 (storage busy, a host
// at its cap) is no sign of a delete, and Next would boot the tree
// before the answer.
func deletedUnder(r *httpmsg.Request, t *Tree, err error) error {
	if err == nil || t.Next == nil || r.Context().Err() != nil || !instanceStopped(err) {
		return err
	}
	if _, nerr := t.Next(r.Context()); nerr != nil && ErrorOf(nerr).Type == ErrNotFound {
		return fail(ErrNotFound, "no such session")
	}
	return err
}

// Close ends every open event stream; the host calls it before shutdown.
func (h *TreeHandler) Close() { h.once.Do(func() { close(h.closing) }) }

// sessionBody reads the body of a request to a session's route once the
// session is found: an unknown session is 404 whatever the body (too
// large, malformed or incomplete), as it is for a route with no body.
// The route's own write finds the session again, in its transaction.
func (h *TreeHandler) sessionBody(r *httpmsg.Request, t *Tree) ([]byte, error) {
	if _, err := t.Instance.Session(r.Context(), r.PathValue("id")); err != nil {
		return nil, err
	}
	return readBody(r, h.cfg.maxBody)
}

func (h *TreeHandler) prompt(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	body, err := h.sessionBody(r, t)
	if err != nil {
		return err
	}
	req, err := DecodePrompt(body)
	if err != nil {
		return err
	}
	a, err := t.Instance.Admit(r.Context(), r.PathValue("id"), core.PromptInput{ClientID: req.ID, Text: req.Text, Mode: req.Mode})
	if err != nil {
		return err
	}
	writeJSON(w, httpmsg.StatusAccepted, map[string]any{"prompt_id": a.PromptID, "duplicate": a.Duplicate})
	return nil
}

func (h *TreeHandler) interrupt(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	// The interrupt must commit even if the client goes away mid-call.
	did, err := t.Instance.Interrupt(context.WithoutCancel(r.Context()), r.PathValue("id"), event.ReasonUser)
	if err != nil {
		return err
	}
	writeJSON(w, httpmsg.StatusOK, map[string]bool{"interrupted": did})
	return nil
}

func intParam(r *httpmsg.Request, name string, def, min, max int) (int, error) {
	return IntParam(r.URL.Query().Get(name), name, def, min, max)
}

// IntParam reads a whole-number query parameter named name from raw, its
// value: def when raw is empty (absent or given empty, as for every query
// parameter), else a whole number from min to max, or an invalid_request
// error naming it. The local server and the Worker front both read limit
// with it, so the two answer the same query the same way.
func IntParam(raw, name string, def, min, max int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, ok := wholeNumber(raw)
	if !ok || n < int64(min) || n > int64(max) {
		return 0, fail(ErrInvalidRequest, name+" must be a whole number from "+strconv.Itoa(min)+" to "+strconv.Itoa(max))
	}
	return int(n), nil
}

// wholeNumber reads raw as decimal digits alone. strconv's parsers also
// take a sign ("+5", "-0"), which a query would otherwise accept in one
// place and refuse in another (a "+" in a query is a space unless sent as
// %2B); a number too large for int64 is not one either.
func wholeNumber(raw string) (int64, bool) {
	if raw == "" {
		return 0, false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	return n, err == nil
}

// MaxCursor is the largest cursor (before, after, Last-Event-ID) a
// request may give: 2^53-1, the largest integer a JS number holds exactly.
// A Durable Object's SQL cannot take a larger one, so every host refuses it
// alike rather than answer 500 or an empty stream on one of them; sequence
// numbers never come near it.
const MaxCursor = 1<<53 - 1

// int64Param reads a cursor named name from raw: 0 when raw is empty, else
// a whole number from 0 to MaxCursor, or an invalid_request error naming it.
func int64Param(raw, name string) (int64, error) {
	if raw == "" {
		return 0, nil
	}
	n, ok := wholeNumber(raw)
	if !ok || n > MaxCursor {
		return 0, fail(ErrInvalidRequest, name+" must be a whole number from 0 to "+strconv.FormatInt(MaxCursor, 10))
	}
	return n, nil
}

// snapshotBody is the JSON of GET /v1/sessions/{id}.
type snapshotBody struct {
	ID             string          `json:"id"`
	ParentID       string          `json:"parent_id,omitempty"`
	RootID         string          `json:"root_id"`
	CreatedAt      int64           `json:"created_at"`
	UpdatedAt      int64           `json:"updated_at"`
	Config         json.RawMessage `json:"config"`
	Status         string          `json:"status"`
	Turns          int             `json:"turns"`
	Cursor         int64           `json:"cursor"`
	Claim          *claimBody      `json:"claim"`
	Blockers       []blockerBody   `json:"blockers"`
	Prompts        []promptBody    `json:"prompts"`
	Children       []childBody     `json:"children"`
	Messages       []messageBody   `json:"messages"`
	MessagesBefore *int64          `json:"messages_before"`
	ReadOnly       bool            `json:"read_only,omitempty"`
}

// childBody is one sub-agent of the session (docs/api.md, Sub-agents).
type childBody struct {
	ID         string `json:"id"`
	CallID     string `json:"call_id"`
	Background bool   `json:"background"`
	Job        string `json:"job"`
	Status     string `json:"status"`
	Turns      int    `json:"turns"`
}

type claimBody struct {
	ExecutionID    string `json:"execution_id,omitempty"`
	ClaimedAt      int64  `json:"claimed_at"`
	ResumeAttempts int    `json:"resume_attempts"`
	RetryAt        int64  `json:"retry_at,omitempty"`
}

// promptBody is a prompt not yet ended; its text is cut to
// core.PromptTextPreview bytes, and text_truncated says it was.
type promptBody struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Text          string `json:"text"`
	TextTruncated bool   `json:"text_truncated,omitempty"`
}

type messageBody struct {
	ID         string          `json:"id"`
	Seq        int64           `json:"seq"`
	PromptID   string          `json:"prompt_id,omitempty"`
	Role       string          `json:"role"`
	Text       string          `json:"text"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	CreatedAt  int64           `json:"created_at"`
	Partial    bool            `json:"partial,omitempty"`
}

func (h *TreeHandler) snapshot(w httpmsg.ResponseWriter, r *httpmsg.Request, t *Tree) error {
	limit, err := intParam(r, "limit", h.cfg.messageLimit, 1, MaxMessageLimit)
	if err != nil {
		return err
	}
	before, err := int64Param(r.URL.Query().Get("before"), "before")
	if err != nil {
		return err
	}
	snap, err := t.Instance.Snapshot(r.Context(), r.PathValue("id"), before, limit)
	if err != nil {
		return err
	}
	s := snap.Session
	body := snapshotBody{ID: s.ID, ParentID: s.ParentID, RootID: s.RootID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Config: s.Config, Status: snap.Status, Turns: s.Turns, Cursor: snap.Cursor, Blockers: blockerBodies(snap.Blockers),
		Prompts: []promptBody{}, Children: []childBody{}, Messages: []messageBody{}, ReadOnly: snap.ReadOnly}
	for _, c := range snap.Children {
		body.Children = append(body.Children, childBody{ID: c.ID, CallID: c.CallID, Background: c.Background, Job: string(c.Job), Status: c.Status, Turns: c.Turns})
	}
	if c := snap.Claim; c != nil {
		body.Claim = &claimBody{ExecutionID: c.ExecutionID, ClaimedAt: c.ClaimedAt, ResumeAttempts: c.ResumeAttempts, RetryAt: c.RetryAt}
	}
	for _, p := range snap.Prompts {
		body.Prompts = append(body.Prompts, promptBody{ID: p.ID, State: p.State, Text: p.Text, TextTruncated: p.Truncated})
	}
	for _, m := range snap.Messages {
		body.Messages = append(body.Messages, messageBody(m))
	}
	if snap.MoreBefore && len(snap.Messages) > 0 {
		first := snap.Messages[0].Seq
		body.MessagesBefore = &first
	}
	writeJSON(w, httpmsg.StatusOK, body)
	return nil
}

// instanceStopped reports whether err is a tree's instance stopping under
// a request (closed, or fenced by a newer one): ErrorOf's 503 "the
// session's instance stopped".
func instanceStopped(err error) bool {
	return ErrorOf(err).Type == ErrUnavailable &&
		(errors.Is(err, core.ErrFenced) || errors.Is(err, core.ErrClosed) || errors.Is(err, storage.ErrClosed))
}
