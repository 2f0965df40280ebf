package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
)

// Deps are the composed handler's collaborators; all but Log required.
type Deps struct {
	Trees Trees
	Auth  Authenticator
	Clock core.Clock
	IDs   core.IDSource
	Log   *logs.Logger // nil discards
}

// Config is the handler's immutable configuration.
type Config struct {
	maxBody      int64
	heartbeat    time.Duration
	messageLimit int
	listLimit    int
	defaults     core.SessionConfig
	models       []string // nil: any
	loopbackOnly bool
	origins      []string
	streamLimit  int
}

// Defaults.
const (
	DefaultMaxBody      = 1 << 20
	DefaultHeartbeat    = 15 * time.Second
	DefaultMessageLimit = 50
	MaxMessageLimit     = 500
	DefaultListLimit    = 50
	MaxListLimit        = 200
	DefaultStreamLimit  = 64
)

// NewConfig returns the defaults.
func NewConfig() Config {
	return Config{maxBody: DefaultMaxBody, heartbeat: DefaultHeartbeat, messageLimit: DefaultMessageLimit, listLimit: DefaultListLimit,
		streamLimit: DefaultStreamLimit}
}

// WithMaxBody caps request bodies (bytes); larger ones are 413. Default 1 MiB.
// checkPageSizes refuses page sizes outside 1 to the API's maximums: a
// list page of zero would never advance, and a larger one than documented
// would break clients that size buffers by the docs.
func (c Config) checkPageSizes() error {
	if c.streamLimit < 1 {
		return fmt.Errorf("event stream limit %d must be at least 1", c.streamLimit)
	}
	if c.listLimit < 1 || c.listLimit > MaxListLimit || c.messageLimit < 1 || c.messageLimit > MaxMessageLimit {
		return fmt.Errorf("page sizes %d and %d must be 1 to %d and 1 to %d", c.listLimit, c.messageLimit, MaxListLimit, MaxMessageLimit)
	}
	return nil
}

func (c Config) WithMaxBody(n int64) Config { c.maxBody = n; return c }

// WithStreamLimit caps the event streams open at once on one session tree
// (its sessions together); opening one more ends the oldest. Each open
// stream holds a subscription, a connection and buffers, so a client that
// opens them without end would otherwise exhaust the host. Default 64;
// New refuses less than 1.
func (c Config) WithStreamLimit(n int) Config { c.streamLimit = n; return c }

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

// WithAllowedModels sets the models a create may name in its config's
// `model`; another is refused 400 invalid_request naming the field. The
// session defaults' model, if any, must be one (New refuses it otherwise).
// Default nil: any model; an empty list allows none. The runner refuses
// the rest (a stored session's model no longer allowed) at its next model
// request.
func (c Config) WithAllowedModels(names []string) Config {
	c.models = slices.Clone(names)
	return c
}

// checkModels refuses a default model a client could not name itself.
func (c Config) checkModels() error {
	if m := c.defaults.Model; m != "" && !c.allowsModel(m) {
		return fmt.Errorf("the session defaults' model %q is not among the allowed models", m)
	}
	return nil
}

func (c Config) allowsModel(name string) bool {
	return c.models == nil || slices.Contains(c.models, name)
}

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

// Handler serves the whole API for a host whose trees run in this
// process: a Directory over deps.Trees, and a TreeHandler for each tree
// route, given the tree once the directory authorized the caller and
// deps.Trees booted it.
type Handler struct {
	dir   *Directory
	tree  *TreeHandler
	trees Trees
	mux   *route.Mux
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

// Tree reports whether the route is one tree's (TreeHandler's): every
// /v1/sessions/{id} route but DELETE, which is the directory's.
func (rt Route) Tree() bool {
	return strings.HasPrefix(rt.Pattern, "/v1/sessions/{id}") && rt.Method != httpmsg.MethodDelete
}

// ReadsBody reports whether the route's handler reads a request body, and
// so refuses one over max_body (413): every POST but interrupt, which
// takes none. The Cloudflare front refuses a declared length over the cap
// unread on these routes only (worker.Front.Decide).
func (rt Route) ReadsBody() bool {
	return rt.Method == httpmsg.MethodPost && rt.Pattern != "/v1/sessions/{id}/interrupt"
}

// QueryToken reports whether the route takes its bearer token from
// ?access_token= too: the event stream (EventSource cannot send headers).
func (rt Route) QueryToken() bool {
	return rt.Method == httpmsg.MethodGet && strings.HasSuffix(rt.Pattern, "/events")
}

// New returns the composed handler.
func New(deps Deps, cfg Config) (*Handler, error) {
	if deps.Trees == nil || deps.Auth == nil || deps.Clock == nil || deps.IDs == nil {
		return nil, errors.New("new api handler: Trees, Auth, Clock and IDs are required")
	}
	dir, err := NewDirectory(DirectoryDeps{Index: deps.Trees, Auth: deps.Auth, IDs: deps.IDs, Log: deps.Log}, cfg)
	if err != nil {
		return nil, fmt.Errorf("new api handler: %w", err)
	}
	tree, err := NewTreeHandler(TreeDeps{Clock: deps.Clock, Log: deps.Log}, cfg)
	if err != nil {
		return nil, fmt.Errorf("new api handler: %w", err)
	}
	h := &Handler{dir: dir, tree: tree, trees: deps.Trees, mux: &route.Mux{Fallback: httpmsg.HandlerFunc(Unrouted)}}
	for _, rt := range Routes {
		pattern := rt.Method + " " + rt.Pattern
		if fn := tree.routes[pattern]; fn != nil {
			h.mux.HandleFunc(pattern, h.serveTree(rt, fn))
		} else {
			h.mux.Handle(pattern, dir.mux)
		}
	}
	return h, nil
}

// ServeHTTP implements httpmsg.Handler. The Host and Origin checks come
// first (Admit); then unknown paths are 404 and known paths with another
// method 405, both with the JSON error body (Unrouted).
func (h *Handler) ServeHTTP(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	if !h.Admit(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Admit applies the checks that come before routing (Directory.Admit).
func (h *Handler) Admit(w httpmsg.ResponseWriter, r *httpmsg.Request) bool { return h.dir.Admit(w, r) }

// Close ends every open event stream; the host calls it before shutdown.
func (h *Handler) Close() { h.tree.Close() }

// serveTree serves a tree route: the directory authorizes the caller from
// the index, and only then is the tree booted (Trees.Get) and handed to
// the per-tree handler.
func (h *Handler) serveTree(rt Route, fn treeFunc) httpmsg.HandlerFunc {
	pattern := rt.Method + " " + rt.Pattern
	return func(w httpmsg.ResponseWriter, r *httpmsg.Request) {
		t, err := h.boot(r, rt.QueryToken())
		if err != nil {
			writeError(h.tree.log, w, err)
			return
		}
		h.tree.run(w, r, pattern, fn, t)
	}
}

// boot returns the tree of the session in the path, running, once the
// caller is known to own it. Ownership is checked from the index before
// Get: Get boots a tree that is not running (a new epoch, a sweep that
// resumes turns and spends on the model), which another principal must
// never be able to cause. Any failure to find it, or another owner, is
// 404.
func (h *Handler) boot(r *httpmsg.Request, queryToken bool) (*Tree, error) {
	owner, err := h.dir.Authorize(r, queryToken)
	if err != nil {
		return nil, err
	}
	rootID := root(r.PathValue("id"))
	inst, info, err := h.trees.Get(r.Context(), rootID)
	if err == nil && inst.Closed() {
		// Stopped between the lookup and now (idle eviction): the host
		// boots the tree's next instance.
		inst, info, err = h.trees.Get(r.Context(), rootID)
	}
	if err != nil {
		return nil, err
	}
	if info.Principal != owner.Principal {
		// Deleted and taken by another principal since Owner.
		return nil, fail(ErrNotFound, "no such session")
	}
	next := func(ctx context.Context) (*core.Instance, error) {
		inst, now, err := h.trees.Get(ctx, rootID)
		if err == nil && (now.Principal != info.Principal || now.CreatedAt != info.CreatedAt) {
			// Deleted and its id taken by another tree since (a library
			// caller may reuse an id), another principal's or the same
			// one's: not the tree the stream was opened on. Its creation
			// time tells them apart (a re-creation within the same
			// millisecond would not be told).
			return nil, fail(ErrNotFound, "no such session")
		}
		return inst, err
	}
	return &Tree{RootID: rootID, Principal: owner.Principal, Instance: inst, Next: next}, nil
}
