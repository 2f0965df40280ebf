package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
)

// Deps are the handler's collaborators, all required.
type Deps struct {
	Trees Trees
	Auth  Authenticator
	Clock core.Clock
	IDs   core.IDSource
	Log   *slog.Logger // nil discards
}

// Config is the handler's immutable configuration.
type Config struct {
	maxBody      int64
	heartbeat    time.Duration
	messageLimit int
	listLimit    int
	defaults     core.SessionConfig
	loopbackOnly bool
	origins      []string
}

// Defaults.
const (
	DefaultMaxBody      = 1 << 20
	DefaultHeartbeat    = 15 * time.Second
	DefaultMessageLimit = 50
	MaxMessageLimit     = 500
	DefaultListLimit    = 50
	MaxListLimit        = 200
)

// NewConfig returns the defaults.
func NewConfig() Config {
	return Config{maxBody: DefaultMaxBody, heartbeat: DefaultHeartbeat, messageLimit: DefaultMessageLimit, listLimit: DefaultListLimit}
}

// WithMaxBody caps request bodies (bytes); larger ones are 413. Default 1 MiB.
func (c Config) WithMaxBody(n int64) Config { c.maxBody = n; return c }

// WithHeartbeat sets the interval of ":" comments on idle event streams.
// Default 15 s.
func (c Config) WithHeartbeat(d time.Duration) Config { c.heartbeat = d; return c }

// WithPageSizes sets how many sessions GET /v1/sessions lists, and how
// many messages GET /v1/sessions/{id} returns, when the request gives no
// limit. Default 50 and 50; New refuses more than MaxListLimit and
// MaxMessageLimit, the most a request may ask for.
func (c Config) WithPageSizes(sessions, messages int) Config {
	c.listLimit, c.messageLimit = sessions, messages
	return c
}

// WithSessionDefaults sets what a new session's config takes for the
// fields its create request leaves out. Default: none.
func (c Config) WithSessionDefaults(d core.SessionConfig) Config { c.defaults = d; return c }

// WithLoopbackOnly(true) refuses (403 forbidden_host) a request whose Host
// header names anything but a loopback name or address: the defence
// against DNS rebinding of a server without tokens, which must not answer
// a browser page that a rebound name made "same-origin". Default false.
func (c Config) WithLoopbackOnly(on bool) Config { c.loopbackOnly = on; return c }

// WithAllowedOrigins sets the browser origins (`https://console.example`)
// whose pages may call the API; they get CORS headers and preflights. A
// request with any other Origin header is refused (403 forbidden_origin),
// with tokens or without. Default: none, so every request that carries an
// Origin is refused; requests without one (curl, SDKs) are not affected.
// New checks each with CanonicalOrigin.
func (c Config) WithAllowedOrigins(origins ...string) Config {
	c.origins = append([]string(nil), origins...)
	return c
}

// Handler serves the API.
type Handler struct {
	deps Deps
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux

	origins map[string]bool // canonical allowed origins

	closing chan struct{}
	once    sync.Once
}

// Route is one documented route.
type Route struct{ Method, Pattern string }

// Routes lists every route the handler serves; docs/api.md documents the
// same set and a test keeps them equal.
var Routes = []Route{
	{"GET", "/healthz"},
	{"POST", "/v1/sessions"},
	{"GET", "/v1/sessions"},
	{"GET", "/v1/sessions/{id}"},
	{"DELETE", "/v1/sessions/{id}"},
	{"POST", "/v1/sessions/{id}/prompt"},
	{"POST", "/v1/sessions/{id}/interrupt"},
	{"GET", "/v1/sessions/{id}/events"},
	{"GET", "/v1/sessions/{id}/permissions"},
	{"POST", "/v1/sessions/{id}/permissions/{rid}"},
	{"GET", "/v1/sessions/{id}/questions"},
	{"POST", "/v1/sessions/{id}/questions/{qid}"},
}

// New returns the handler.
func New(deps Deps, cfg Config) (*Handler, error) {
	if deps.Trees == nil || deps.Auth == nil || deps.Clock == nil || deps.IDs == nil {
		return nil, errors.New("new api handler: Trees, Auth, Clock and IDs are required")
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.listLimit < 1 || cfg.listLimit > MaxListLimit || cfg.messageLimit < 1 || cfg.messageLimit > MaxMessageLimit {
		return nil, fmt.Errorf("new api handler: page sizes %d and %d must be 1 to %d and 1 to %d", cfg.listLimit, cfg.messageLimit, MaxListLimit, MaxMessageLimit)
	}
	h := &Handler{deps: deps, cfg: cfg, log: log, mux: http.NewServeMux(), origins: map[string]bool{}, closing: make(chan struct{})}
	for _, o := range cfg.origins {
		canonical, err := CanonicalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("new api handler: %w", err)
		}
		h.origins[canonical] = true
	}
	handlers := map[Route]func(w http.ResponseWriter, r *http.Request) error{
		{"GET", "/healthz"}:                             h.health,
		{"POST", "/v1/sessions"}:                        h.create,
		{"GET", "/v1/sessions"}:                         h.list,
		{"GET", "/v1/sessions/{id}"}:                    h.snapshot,
		{"DELETE", "/v1/sessions/{id}"}:                 h.delete,
		{"POST", "/v1/sessions/{id}/prompt"}:            h.prompt,
		{"POST", "/v1/sessions/{id}/interrupt"}:         h.interrupt,
		{"GET", "/v1/sessions/{id}/events"}:             h.events,
		{"GET", "/v1/sessions/{id}/permissions"}:        h.pending("permissions"),
		{"POST", "/v1/sessions/{id}/permissions/{rid}"}: h.reply("permission"),
		{"GET", "/v1/sessions/{id}/questions"}:          h.pending("questions"),
		{"POST", "/v1/sessions/{id}/questions/{qid}"}:   h.reply("question"),
	}
	for _, rt := range Routes {
		fn := handlers[rt]
		h.mux.HandleFunc(rt.Method+" "+rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					h.log.Error("handler panicked", "route", rt.Pattern, "panic", p)
					h.writeError(w, fail(ErrInternal, "internal error"))
				}
			}()
			if err := fn(w, r); err != nil {
				h.writeError(w, err)
			}
		})
	}
	return h, nil
}

// ServeHTTP implements http.Handler. The Host and Origin checks come first
// (Admit); then unknown paths are 404 and known paths with another method
// 405, both with the JSON error body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.Admit(w, r) {
		return
	}
	_, pattern := h.mux.Handler(r)
	if pattern == "" {
		if allowed := h.allowed(r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			h.writeError(w, fail(ErrMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
			return
		}
		h.writeError(w, fail(ErrNotFound, "no route "+r.URL.Path))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// allowed lists the methods the request's path is served with.
func (h *Handler) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := h.mux.Handler(probe); p != "" {
			out = append(out, m)
		}
	}
	return out
}

// Close ends every open event stream; the host calls it before shutdown.
func (h *Handler) Close() { h.once.Do(func() { close(h.closing) }) }

func (h *Handler) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// tree resolves the session in the path to its tree's instance, checking
// the caller owns it. Any failure to find it, or another owner, is 404.
// Ownership is checked from the host's index before Get: Get boots a tree
// that is not running (a new epoch, a sweep that resumes turns and spends
// on the model), which another principal must never be able to cause.
func (h *Handler) tree(r *http.Request, queryToken bool) (*core.Instance, string, string, error) {
	principal, err := h.deps.Auth.Authenticate(r, queryToken)
	if err != nil {
		return nil, "", "", err
	}
	id := r.PathValue("id")
	owner, err := h.deps.Trees.Owner(r.Context(), root(id))
	if err != nil {
		return nil, "", "", err
	}
	if owner.Principal != principal {
		return nil, "", "", fail(ErrNotFound, "no such session")
	}
	inst, info, err := h.deps.Trees.Get(r.Context(), root(id))
	if err == nil && inst.Closed() {
		// Stopped between the lookup and now (idle eviction): the host
		// boots the tree's next instance.
		inst, info, err = h.deps.Trees.Get(r.Context(), root(id))
	}
	if err != nil {
		return nil, "", "", err
	}
	if info.Principal != principal {
		// Deleted and taken by another principal since Owner.
		return nil, "", "", fail(ErrNotFound, "no such session")
	}
	return inst, id, principal, nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) error {
	principal, err := h.deps.Auth.Authenticate(r, false)
	if err != nil {
		return err
	}
	body, err := readBody(r, h.cfg.maxBody)
	if err != nil {
		return err
	}
	req, err := DecodeCreate(body)
	if err != nil {
		return err
	}
	config, err := h.withDefaults(req.Config)
	if err != nil {
		return err
	}
	id := h.deps.IDs.NewID()
	_, err = h.deps.Trees.Create(r.Context(), id, principal, func(inst *core.Instance) error {
		_, err := inst.CreateSession(r.Context(), core.NewSession{ID: id, Principal: principal, Config: config})
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
	return nil
}

// withDefaults fills the fields a create request left out from the
// configured defaults; the stored config is the result.
func (h *Handler) withDefaults(raw json.RawMessage) (json.RawMessage, error) {
	c, err := core.ParseSessionConfig(raw)
	if err != nil {
		return nil, err
	}
	d := h.cfg.defaults
	if c.SystemPrompt == "" {
		c.SystemPrompt = d.SystemPrompt
	}
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.Tools == nil {
		c.Tools = d.Tools
	}
	return json.Marshal(c)
}

// SessionItem is one entry of the session list.
type SessionItem struct {
	ID        string `json:"id"`
	CreatedAt int64  `json:"created_at"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	principal, err := h.deps.Auth.Authenticate(r, false)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", h.cfg.listLimit, 1, MaxListLimit)
	if err != nil {
		return err
	}
	trees, next, err := h.deps.Trees.List(r.Context(), principal, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]SessionItem, 0, len(trees))
	for _, t := range trees {
		items = append(items, SessionItem{ID: t.RootID, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": items, "next_cursor": next})
	return nil
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) error {
	_, id, _, err := h.tree(r, false)
	if err != nil {
		return err
	}
	if strings.Contains(id, ".") {
		return fail(ErrInvalidRequest, "only a root session can be deleted; it deletes its whole tree")
	}
	// Deleting must finish even if the client goes away mid-call.
	if err := h.deps.Trees.Delete(context.WithoutCancel(r.Context()), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) prompt(w http.ResponseWriter, r *http.Request) error {
	inst, id, _, err := h.tree(r, false)
	if err != nil {
		return err
	}
	body, err := readBody(r, h.cfg.maxBody)
	if err != nil {
		return err
	}
	req, err := DecodePrompt(body)
	if err != nil {
		return err
	}
	a, err := inst.Admit(r.Context(), id, core.PromptInput{ClientID: req.ID, Text: req.Text, Mode: req.Mode})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"prompt_id": a.PromptID, "duplicate": a.Duplicate})
	return nil
}

func (h *Handler) interrupt(w http.ResponseWriter, r *http.Request) error {
	inst, id, _, err := h.tree(r, false)
	if err != nil {
		return err
	}
	// The interrupt must commit even if the client goes away mid-call.
	did, err := inst.Interrupt(context.WithoutCancel(r.Context()), id, event.ReasonUser)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"interrupted": did})
	return nil
}

// sessionExists checks the caller may see the session in the path and that
// it exists (a child id is checked against its tree, not only its root).
func (h *Handler) sessionExists(r *http.Request) error {
	inst, id, _, err := h.tree(r, false)
	if err != nil {
		return err
	}
	_, err = inst.Session(r.Context(), id)
	return err
}

// pending lists pending blockers. Blockers are created by durable waits
// (questions and permission prompts), which this build does not have yet,
// so the lists are truthfully empty for every existing session.
func (h *Handler) pending(kind string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := h.sessionExists(r); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{kind: []any{}})
		return nil
	}
}

// reply answers a blocker. With no blockers in this build, every well-formed
// reply names an unknown request: 404.
func (h *Handler) reply(kind string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := h.sessionExists(r); err != nil {
			return err
		}
		body, err := readBody(r, h.cfg.maxBody)
		if err != nil {
			return err
		}
		if _, err := DecodeReply(body, kind); err != nil {
			return err
		}
		return fail(ErrNotFound, "no pending "+kind+" "+r.PathValue("rid")+r.PathValue("qid"))
	}
}

func intParam(r *http.Request, name string, def, min, max int) (int, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min || n > max {
		return 0, fail(ErrInvalidRequest, name+" must be a whole number from "+strconv.Itoa(min)+" to "+strconv.Itoa(max))
	}
	return n, nil
}

func int64Param(raw, name string) (int64, error) {
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, fail(ErrInvalidRequest, name+" must be a whole number of at least 0")
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
	Blockers       []any           `json:"blockers"`
	Prompts        []promptBody    `json:"prompts"`
	Messages       []messageBody   `json:"messages"`
	MessagesBefore *int64          `json:"messages_before"`
	ReadOnly       bool            `json:"read_only,omitempty"`
}

type claimBody struct {
	ExecutionID    string `json:"execution_id,omitempty"`
	ClaimedAt      int64  `json:"claimed_at"`
	ResumeAttempts int    `json:"resume_attempts"`
	RetryAt        int64  `json:"retry_at,omitempty"`
}

type promptBody struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Text  string `json:"text"`
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

func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request) error {
	inst, id, _, err := h.tree(r, false)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", h.cfg.messageLimit, 1, MaxMessageLimit)
	if err != nil {
		return err
	}
	before, err := int64Param(r.URL.Query().Get("before"), "before")
	if err != nil {
		return err
	}
	snap, err := inst.Snapshot(r.Context(), id, before, limit)
	if err != nil {
		return err
	}
	s := snap.Session
	body := snapshotBody{ID: s.ID, ParentID: s.ParentID, RootID: s.RootID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Config: s.Config, Status: snap.Status, Turns: s.Turns, Cursor: snap.Cursor, Blockers: []any{},
		Prompts: []promptBody{}, Messages: []messageBody{}, ReadOnly: snap.ReadOnly}
	if c := snap.Claim; c != nil {
		body.Claim = &claimBody{ExecutionID: c.ExecutionID, ClaimedAt: c.ClaimedAt, ResumeAttempts: c.ResumeAttempts, RetryAt: c.RetryAt}
	}
	for _, p := range snap.Prompts {
		body.Prompts = append(body.Prompts, promptBody(p))
	}
	for _, m := range snap.Messages {
		body.Messages = append(body.Messages, messageBody(m))
	}
	if snap.MoreBefore && len(snap.Messages) > 0 {
		first := snap.Messages[0].Seq
		body.MessagesBefore = &first
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
