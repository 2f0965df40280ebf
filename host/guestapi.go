package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

// GuestHandler serves the public API (docs/api.md) of a host whose trees
// run as guests (Config.Guest). It composes core/api's two parts: the
// host's index is the Directory (GET /healthz, GET /v1/sessions, DELETE of
// a root: stop the guest, remove rows and files; and the owner check of
// every tree route), and each tree's guest serves that tree's routes, the
// per-tree handler running inside it; the host streams its answer. POST
// /v1/sessions is both: the host chooses the tree id, boots the tree's
// guest, has the guest create the root session from the request (docs/abi.md
// §6) and only then makes the tree visible.
//
// Responses are those of core/api in process: the same statuses and error
// bodies, because the host's own answers are the Directory's, or written
// with api.WriteError, and the guest runs the same handler. Auth is
// checked twice: by the host, which forwards a request only to a tree the
// caller's principal owns (any other tree is 404, as in process, and is
// not booted), and by the guest, with the same tokens
// (wasm/backend.Config.Boot.API.Tokens).
type GuestHandler struct {
	h    *Host
	auth api.Authenticator
	dir  *api.Directory
	log  *slog.Logger
	// routes names each request's route; serve holds, per pattern, what
	// serves it (the guest's tree, the host's create, the directory).
	routes *route.Mux
	serve  map[string]func(w http.ResponseWriter, r *http.Request, m *httpmsg.Request)

	closing context.Context // cancelled by Close: forwarded requests end
	close   context.CancelFunc
}

// NewGuestHandler returns the API handler of h, which must run trees as
// guests. auth must name the principals the guests' tokens name; cfg
// configures what the host answers itself (list pages) and how it checks a
// create before opening a tree for it (session defaults, allowed models:
// those the guests are booted with); the guests' handlers are configured
// by wasm/backend.Config.Boot.API. The Host and Origin
// checks (api.Config.WithLoopbackOnly, WithAllowedOrigins) are the host's,
// from cfg.
func NewGuestHandler(h *Host, auth api.Authenticator, cfg api.Config, log *slog.Logger) (*GuestHandler, error) {
	if h.cfg.Guest == nil {
		return nil, errors.New("new guest handler: the host does not run trees as guests")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The directory's own create is never reached (create below): in
	// guest mode the host cannot run its init, and Host.Create says so.
	dir, err := api.NewDirectory(api.DirectoryDeps{Index: h, Auth: auth, IDs: h.cfg.IDs, Log: log}, cfg)
	if err != nil {
		return nil, fmt.Errorf("new guest handler: %w", err)
	}
	g := &GuestHandler{h: h, auth: auth, dir: dir, log: log, routes: &route.Mux{}, serve: map[string]func(http.ResponseWriter, *http.Request, *httpmsg.Request){}}
	g.closing, g.close = context.WithCancel(context.Background())
	for _, rt := range api.Routes {
		pattern := rt.Method + " " + rt.Pattern
		switch {
		case rt.Method == http.MethodPost && rt.Pattern == "/v1/sessions":
			g.serve[pattern] = g.create
		case rt.Tree():
			g.serve[pattern] = g.tree(rt.QueryToken(), rt.ReadsBody())
		default:
			g.serve[pattern] = func(w http.ResponseWriter, _ *http.Request, m *httpmsg.Request) {
				dir.ServeRoute(nethttp.Writer(w), m)
			}
		}
		g.routes.HandleFunc(pattern, nil)
	}
	return g, nil
}

// ServeHTTP implements http.Handler. The Host and Origin checks of the
// handler's configuration come first, as in process (api.Directory.Admit);
// unknown routes are 404, other methods 405 (api.Unrouted). The API's
// checks read the request as httpmsg (nethttp); a guest gets it as it
// came.
func (g *GuestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mw, m := nethttp.Writer(w), nethttp.Request(r)
	if !g.dir.Admit(mw, m) {
		return
	}
	match, ok := g.routes.Match(m.Method, m.URL.EscapedPath())
	if !ok {
		api.Unrouted(mw, m)
		return
	}
	match.SetPathValues(m)
	// A panic is a 500 internal that the log explains (with its stack), as
	// core/api answers one in process, not a connection dropped with no
	// answer; but once the head is out (an event stream, a 200 body begun)
	// the response is aborted instead, as core/api aborts it in process: a
	// 500 then would be a second header and a JSON error appended to the
	// body. net/http's http.ErrAbortHandler is passed on, for the server
	// to drop the response, as core/api's routes pass it on in process.
	hw := &headWriter{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			// The path only: a query may hold an access token.
			g.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "route", match.Pattern,
				"head_sent", hw.sent, "panic", p, "stack", string(debug.Stack()))
			if hw.sent {
				panic(http.ErrAbortHandler)
			}
			api.WriteError(mw, &api.Error{Type: api.ErrInternal, Message: "internal error"})
		}
	}()
	g.serve[match.Pattern](hw, r, m)
}

// headWriter records whether the response's head was sent (WriteHeader, a
// Write, or a Flush, each of which sends it), for ServeHTTP's recover.
// It stays an http.Flusher (the event stream flushes each event), and
// Unwrap lets http.ResponseController reach the connection.
type headWriter struct {
	http.ResponseWriter
	sent bool
}

func (w *headWriter) WriteHeader(status int) {
	w.sent = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *headWriter) Write(b []byte) (int, error) {
	w.sent = true
	return w.ResponseWriter.Write(b)
}

func (w *headWriter) Flush() {
	w.sent = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *headWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Close ends every forwarded request (event streams); the server calls it
// before shutdown.
func (g *GuestHandler) Close() { g.close() }

// tree serves a route of one tree: once the directory has found, from the
// index, that the caller owns the tree, the tree's guest serves it.
// r is the request, m the same as the API reads it (path values set).
// On a route that reads a body, a declared length over max_body is 413,
// and a compressed body 400, before the guest is involved: the guest's host reads the body whole
// first, so waiting for a body the client may never send would hold the
// request to the read timeout (the Cloudflare front refuses it unread too).
// On any other route the guest is given no body at all, for the same
// reason.
func (g *GuestHandler) tree(queryToken, readsBody bool) func(http.ResponseWriter, *http.Request, *httpmsg.Request) {
	return func(w http.ResponseWriter, r *http.Request, m *httpmsg.Request) {
		if _, err := g.dir.Authorize(m, queryToken); err != nil {
			g.fail(w, err)
			return
		}
		if readsBody {
			if err := g.dir.CheckBodyUnread(m); err != nil {
				g.fail(w, err)
				return
			}
		} else {
			// The route reads no body (an interrupt, a GET), and the
			// guest's host would still wait for one whole: a body declared
			// and held back would hold the answer to the read timeout,
			// where in process it comes at once. The guest gets none.
			r = r.WithContext(r.Context()) // a copy: the server closes its own body
			r.Body, r.ContentLength = http.NoBody, 0
		}
		rootID, _, _ := strings.Cut(m.PathValue("id"), ".")
		gi, release, err := g.h.acquire(r.Context(), rootID)
		if err != nil {
			g.fail(w, err)
			return
		}
		defer release()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(g.closing, cancel)
		defer stop()
		gi.tree.ServeHTTP(w, guestCredentials(r.WithContext(ctx)))
	}
}

// create serves POST /v1/sessions: a new tree whose guest creates the root
// session from the request, once the host has checked it as the guest
// will (Directory.CheckCreate: cfg's allowed models and session defaults
// must be the guests'). Whatever the guest answers is the answer; the
// tree becomes visible only if that is 201, and is removed otherwise.
func (g *GuestHandler) create(w http.ResponseWriter, r *http.Request, m *httpmsg.Request) {
	principal, err := g.auth.Authenticate(m, false)
	if err != nil {
		g.fail(w, err)
		return
	}
	// The request is checked before a tree is opened for it: a bad one is
	// 400 as in process, not 503 at the cap, and closes no idle tree.
	body, err := g.dir.CheckCreate(m)
	if err != nil {
		g.fail(w, err)
		return
	}
	key, err := api.ReadCreateKey(m, body)
	if err != nil {
		g.fail(w, err)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	id := g.h.cfg.IDs.NewID()
	var resp *recorder
	init := func(e *entry) (int64, error) {
		gi, ok := e.run.(*guestInstance)
		if !ok {
			return 0, errGuestTrees
		}
		resp = &recorder{header: http.Header{}}
		// As in process, the create finishes even if the client goes away.
		if cutShort(gi.tree, resp, guestCredentials(r.WithContext(context.WithoutCancel(r.Context())))) {
			return 0, errCreateCut
		}
		// The guest names its root session's created_at for the index
		// only (the list says what the session says); never the client's.
		at, _ := strconv.ParseInt(resp.header.Get(api.CreatedAtHeader), 10, 64)
		resp.header.Del(api.CreatedAtHeader)
		if resp.status != http.StatusCreated {
			return 0, errCreateRefused
		}
		return max(at, 0), nil
	}
	if key == nil {
		_, err = g.h.createTree(r.Context(), id, principal, nil, init)
	} else {
		var replayed bool
		if id, replayed, err = g.h.createKeyed(r.Context(), id, principal, *key, init); replayed {
			// The guest answered the first create {"id"}, 201
			// (api.Directory's create); its replay is that answer.
			api.WriteCreated(nethttp.Writer(w), id)
			return
		}
	}
	if resp != nil && (err == nil || errors.Is(err, errCreateRefused)) {
		resp.writeTo(w)
		return
	}
	g.fail(w, err) // the host failed before the guest answered
}

// errCreateRefused: the guest answered a create with something else than
// 201 (an invalid body, say); that answer goes to the client.
var errCreateRefused = errors.New("the guest refused to create the session")

// errCreateCut: the guest's answer to a create was cut short after its
// head (it died between head and end): the create is undone, and its
// client told to try again, rather than sent a 201 without its body.
var errCreateCut = &api.Error{Type: api.ErrUnavailable, Message: "the session's instance stopped while it answered the create; try again"}

// cutShort serves r through h into rec and reports whether h cut the
// answer short (http.ErrAbortHandler: its guest died after the head, or
// aborted its answer), which net/http would do to a client's connection
// but a recorded answer must be told.
func cutShort(h http.Handler, rec *recorder, r *http.Request) (cut bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			cut = true
		}
	}()
	h.ServeHTTP(rec, r)
	return false
}

// fail answers err as core/api does, its detail logged if it is internal.
func (g *GuestHandler) fail(w http.ResponseWriter, err error) {
	if api.Internal(err) {
		g.log.Error("request failed", "err", err)
	}
	api.WriteError(nethttp.Writer(w), err)
}

// treeInfo reads the tree's index row: found only once the tree is ready.
func (h *Host) treeInfo(ctx context.Context, id string) (api.TreeInfo, bool, error) {
	if !ValidTreeID(id) {
		return api.TreeInfo{}, false, nil
	}
	if h.closed.Load() {
		return api.TreeInfo{}, false, ErrClosed
	}
	return h.index.tree(ctx, id)
}

// recorder keeps a guest's (short) answer to a create.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

func (r *recorder) writeTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}

// HashTokens rewrites a REVENANT_TOKENS spec into what a guest is given
// (wasm/backend.Config.Boot.API.Tokens) so that no token enters a guest's memory.
// The host has already authenticated every request it forwards, and
// forwards it with each credential replaced by its SHA-256 in hex
// (guestCredentials); the guest checks that stand-in against its hash, so
// every item becomes "principal:sha256:" + hex(sha256(hex(sha256(token)))).
// A stand-in seen inside a guest opens that guest only, never the host.
// The spec is checked as api.ParseTokens checks it.
func HashTokens(spec string) (string, error) {
	if _, err := api.ParseTokens(spec); err != nil {
		return "", err
	}
	var out []string
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		principal, secret, _ := strings.Cut(item, ":")
		standIn, hashed := strings.CutPrefix(secret, "sha256:")
		if !hashed {
			standIn = hexSHA256(secret)
		}
		out = append(out, principal+":sha256:"+hexSHA256(strings.ToLower(standIn)))
	}
	return strings.Join(out, ","), nil
}

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// guestCredentials returns r as it is forwarded to a guest: the bearer
// token and an access_token query parameter replaced by their stand-ins
// (HashTokens), so the raw token stays in the host, and without Origin:
// the host has checked it (Admit) against the allowed origins, which the
// guest's handler is not given and would refuse.
func guestCredentials(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.Header.Del("Origin")
	if token, ok := api.BearerToken(r.Header.Get("Authorization")); ok {
		out.Header.Set("Authorization", "Bearer "+hexSHA256(token))
	}
	if q := r.URL.Query(); q.Has("access_token") {
		// Every value, not just the first: a token given twice reaches the
		// guest twice, which refuses it as the local server does.
		for i, token := range q["access_token"] {
			q["access_token"][i] = hexSHA256(token)
		}
		out.URL.RawQuery = q.Encode()
	}
	return out
}
