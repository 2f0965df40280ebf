package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
)

// DirectoryDeps are the directory's collaborators; all but Log required.
type DirectoryDeps struct {
	Index Index
	Auth  Authenticator
	IDs   core.IDSource
	Log   *logs.Logger // nil discards
	// Panicked, if set, is told of a route's panic once its 500 is
	// written (route: the route's pattern). A host whose state the panic
	// may have left half-changed (the Durable Object: a delete cut between
	// its steps) gives itself up there; nil: the panic is only logged.
	Panicked func(route string)
}

// Directory serves what is about many trees: GET /healthz, POST and GET
// /v1/sessions (create, list) and DELETE /v1/sessions/{id}, over an Index.
// It also does, for the per-tree routes, what comes before a tree: the Host
// and Origin checks (Admit) and the caller's identity and ownership
// (Authorize), from the index alone, so nothing boots for a request that
// is refused. It never needs a tree's instance, except the new one Create
// hands it.
type Directory struct {
	deps    DirectoryDeps
	cfg     Config
	log     *logs.Logger
	origins map[string]bool // canonical allowed origins
	mux     *route.Mux
}

// NewDirectory returns the directory over deps.Index.
func NewDirectory(deps DirectoryDeps, cfg Config) (*Directory, error) {
	if deps.Index == nil || deps.Auth == nil || deps.IDs == nil {
		return nil, errors.New("new api directory: Index, Auth and IDs are required")
	}
	if err := cfg.checkModels(); err != nil {
		return nil, fmt.Errorf("new api directory: %w", err)
	}
	if err := cfg.checkPageSizes(); err != nil {
		return nil, fmt.Errorf("new api directory: %w", err)
	}
	d := &Directory{deps: deps, cfg: cfg, log: orDiscard(deps.Log), origins: map[string]bool{}, mux: &route.Mux{Fallback: httpmsg.HandlerFunc(Unrouted)}}
	for _, o := range cfg.origins {
		canonical, err := CanonicalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("new api directory: %w", err)
		}
		d.origins[canonical] = true
	}
	for rt, fn := range d.routes() {
		pattern := rt.Method + " " + rt.Pattern
		d.mux.HandleFunc(pattern, handle(d.log, pattern, deps.Panicked, fn))
	}
	return d, nil
}

// routes are the directory's own routes.
func (d *Directory) routes() map[Route]func(httpmsg.ResponseWriter, *httpmsg.Request) error {
	return map[Route]func(httpmsg.ResponseWriter, *httpmsg.Request) error{
		{"GET", "/healthz"}:             d.health,
		{"POST", "/v1/sessions"}:        d.create,
		{"GET", "/v1/sessions"}:         d.list,
		{"DELETE", "/v1/sessions/{id}"}: d.delete,
	}
}

// ServeHTTP serves the directory's routes after Admit (ServeRoute).
func (d *Directory) ServeHTTP(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	if d.Admit(w, r) {
		d.ServeRoute(w, r)
	}
}

// ServeRoute serves a request that has been admitted: a directory route,
// or, for any other, the answer to no route (Unrouted). A host that
// serves the per-tree routes elsewhere routes them before it gets here.
func (d *Directory) ServeRoute(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	d.mux.ServeHTTP(w, r)
}

// handle adapts a route's function: its error is the answer, and a panic
// is logged with its stack, answered 500 internal if nothing of the
// answer was sent yet, then told to panicked (if set). A panic or a
// returned error once the head is out (an event stream, a 200 body begun)
// is logged and aborts the response as the server aborts one
// (httpmsg.Aborter), or, on a writer that cannot abort, ends it where it
// stopped: a 500 there would be a second header and a JSON error appended
// to the body. The server's own abort of
// a response (net/http's http.ErrAbortHandler) is passed on to the
// server, as a net/http handler passes it on (host.GuestHandler's routes,
// under serve -guest).
func handle(log *logs.Logger, pattern string, panicked func(string), fn func(httpmsg.ResponseWriter, *httpmsg.Request) error) httpmsg.HandlerFunc {
	return func(w httpmsg.ResponseWriter, r *httpmsg.Request) {
		head := newHeadWriter(w)
		defer func() {
			if p := recover(); p != nil {
				aborter, _ := w.(httpmsg.Aborter)
				if aborter != nil && aborter.IsAbort(p) {
					panic(p)
				}
				// The path only: a query may hold an access token.
				log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "route", pattern,
					"head_sent", head.sent, "panic", p, "stack", stack())
				if !head.sent {
					WriteError(w, fail(ErrInternal, "internal error"))
				}
				if panicked != nil {
					panicked(pattern)
				}
				if head.sent && aborter != nil {
					aborter.Abort()
				}
			}
		}()
		err := fn(head, r)
		if head.unmarshalled != nil {
			log.Error("answer did not marshal", "method", r.Method, "path", r.URL.Path, "route", pattern, "err", head.unmarshalled)
		}
		switch {
		case err == nil:
		case !head.sent:
			writeError(log, w, err)
		default:
			// The answer is begun: the error cannot be answered (a second
			// header, a JSON error appended to the body), so it is logged,
			// whatever its type, and the response ended as after a panic.
			// A client gone (its request's context ended) is routine, as
			// before the head: not worth an error.
			if r.Context().Err() == nil {
				log.Error("request failed after its answer began", "method", r.Method, "path", r.URL.Path, "route", pattern, "err", err)
			}
			if aborter, ok := w.(httpmsg.Aborter); ok {
				aborter.Abort()
			}
		}
	}
}

// stack is the calling goroutine's stack trace, for the log of a panic.
// It does what runtime/debug.Stack does, without linking runtime/debug
// into the guest, whose size is watched (TestGuestSize).
func stack() string {
	buf := make([]byte, 4096)
	for {
		n := runtime.Stack(buf, false)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Authorize names the caller of a request for a tree's route and checks,
// from the index alone, that the caller owns the tree of the session in
// the path ({id}). Another principal's tree is ErrNotFound, as a missing
// one; nothing is booted either way. queryToken allows ?access_token= (the
// event stream; Route.QueryToken).
func (d *Directory) Authorize(r *httpmsg.Request, queryToken bool) (TreeInfo, error) {
	principal, err := d.deps.Auth.Authenticate(r, queryToken)
	if err != nil {
		return TreeInfo{}, err
	}
	owner, err := d.deps.Index.Owner(r.Context(), root(r.PathValue("id")))
	if err != nil {
		return TreeInfo{}, err
	}
	if owner.Principal != principal {
		return TreeInfo{}, fail(ErrNotFound, "no such session")
	}
	return owner, nil
}

func (d *Directory) health(w httpmsg.ResponseWriter, r *httpmsg.Request) error {
	writeJSON(w, httpmsg.StatusOK, map[string]bool{"ok": true})
	return nil
}

func (d *Directory) create(w httpmsg.ResponseWriter, r *httpmsg.Request) error {
	principal, err := d.deps.Auth.Authenticate(r, false)
	if err != nil {
		return err
	}
	body, err := readBody(r, d.cfg.maxBody)
	if err != nil {
		return err
	}
	req, err := DecodeCreate(body)
	if err != nil {
		return err
	}
	config, err := d.withDefaults(req.Config)
	if err != nil {
		return err
	}
	key, err := ReadCreateKey(r, body)
	if err != nil {
		return err
	}
	id := d.deps.IDs.NewID()
	rootID := id // id may become an earlier create's (a key's replay)
	init := func(inst *core.Instance) error {
		_, err := inst.CreateSession(r.Context(), core.NewSession{ID: rootID, Principal: principal, Config: config})
		return err
	}
	// A one-tree host's index keeps no keys: the host in front of it
	// (the local server of a wasm guest, the Cloudflare front) keeps the
	// directory, and answered the key before the create reached here.
	if keyed, ok := d.deps.Index.(KeyedIndex); ok && key != nil {
		id, err = keyed.CreateKeyed(r.Context(), id, principal, *key, init)
	} else {
		_, err = d.deps.Index.Create(r.Context(), id, principal, init)
	}
	if err != nil {
		return err
	}
	WriteCreated(w, id)
	return nil
}

// CheckBodyUnread refuses, unread, what readBody refuses before it reads
// a byte: a declared Content-Length over max_body (413), then a
// compressed body (400). A host that hands a tree's request whole to the
// tree's guest (guest mode) calls it after Authorize on the routes that
// read a body (Route.ReadsBody): otherwise a client that declares more
// than it sends holds the request until the server's read timeout, then
// gets a 400, where the local server in process and the Cloudflare front
// answer at once.
func (d *Directory) CheckBodyUnread(r *httpmsg.Request) error {
	return checkBodyUnread(r, d.cfg.maxBody)
}

// CheckCreate reads a create request's body and checks it as the create
// route does (DecodeCreate, the allowed models, the stored config's bound
// with the defaults), creating nothing, and returns the body. A host whose
// trees create their own root session (guest mode) refuses a bad create
// with it before it opens a tree for one.
func (d *Directory) CheckCreate(r *httpmsg.Request) ([]byte, error) {
	body, err := readBody(r, d.cfg.maxBody)
	if err != nil {
		return nil, err
	}
	req, err := DecodeCreate(body)
	if err != nil {
		return nil, err
	}
	if _, err := d.withDefaults(req.Config); err != nil {
		return nil, err
	}
	return body, nil
}

// withDefaults fills the fields a create request left out from the
// configured defaults; the stored config is the result, bounded as the
// request's own was (MaxStoredConfig): defaults may add to it.
func (d *Directory) withDefaults(raw json.RawMessage) (json.RawMessage, error) {
	c, err := core.ParseSessionConfig(raw)
	if err != nil {
		return nil, err
	}
	def := d.cfg.defaults
	if c.SystemPrompt == "" {
		c.SystemPrompt = def.SystemPrompt
	}
	if c.Model != "" && !d.cfg.allowsModel(c.Model) {
		return nil, fail(ErrInvalidRequest, fmt.Sprintf("config field \"model\": %q is not allowed on this server (allowed: %s)",
			core.Clip(c.Model), strings.Join(d.cfg.models, ", ")))
	}
	if c.Model == "" {
		c.Model = def.Model
	}
	if c.Tools == nil {
		c.Tools = def.Tools
	}
	stored, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if err := checkStoredConfig(stored, "config with the server's defaults"); err != nil {
		return nil, err
	}
	return stored, nil
}

// SessionItem is one entry of the session list.
type SessionItem struct {
	ID        string `json:"id"`
	CreatedAt int64  `json:"created_at"`
}

func (d *Directory) list(w httpmsg.ResponseWriter, r *httpmsg.Request) error {
	principal, err := d.deps.Auth.Authenticate(r, false)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", d.cfg.listLimit, 1, MaxListLimit)
	if err != nil {
		return err
	}
	trees, next, err := d.deps.Index.List(r.Context(), principal, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]SessionItem, 0, len(trees))
	for _, t := range trees {
		items = append(items, SessionItem{ID: t.RootID, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, httpmsg.StatusOK, map[string]any{"sessions": items, "next_cursor": next})
	return nil
}

// delete deletes a root session's tree. It needs no instance: the index
// stops the tree if it runs, and a tree that does not run is not booted.
func (d *Directory) delete(w httpmsg.ResponseWriter, r *httpmsg.Request) error {
	if _, err := d.Authorize(r, false); err != nil {
		return err
	}
	id := r.PathValue("id")
	if strings.Contains(id, ".") {
		return fail(ErrInvalidRequest, "only a root session can be deleted; it deletes its whole tree")
	}
	// Deleting must finish even if the client goes away mid-call.
	if err := d.deps.Index.Delete(context.WithoutCancel(r.Context()), id); err != nil {
		return err
	}
	w.WriteHeader(httpmsg.StatusNoContent)
	return nil
}

// Unrouted answers a request that no route takes, as every host does: 405
// with Allow when its path is served with other methods, 404 otherwise,
// both with the JSON error body.
func Unrouted(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	allowed := allowedMethods(r)
	for _, m := range allowed {
		if m == r.Method {
			allowed = nil // a route of the path, served elsewhere
			break
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		WriteError(w, fail(ErrMethodNotAllowed, core.Clip(r.Method)+" is not allowed on "+core.Clip(r.URL.Path)))
		return
	}
	WriteError(w, fail(ErrNotFound, "no route "+core.Clip(r.URL.Path)))
}

// routeTable matches every documented route (Routes), to tell a request's
// path apart from no route at all. It is built at the first miss, not at
// package init: that took a millisecond of every wasm guest's start.
var routeTable = sync.OnceValue(func() *route.Mux {
	mux := &route.Mux{}
	for _, rt := range Routes {
		mux.HandleFunc(rt.Method+" "+rt.Pattern, nil)
	}
	return mux
})

// allowedMethods lists the methods the request's path is served with.
func allowedMethods(r *httpmsg.Request) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if _, ok := routeTable().Match(m, r.URL.EscapedPath()); ok {
			out = append(out, m)
			if m == "GET" {
				out = append(out, "HEAD") // every GET route answers HEAD too
			}
		}
	}
	return out
}

func orDiscard(log *logs.Logger) *logs.Logger {
	if log == nil {
		return logs.Discard()
	}
	return log
}
