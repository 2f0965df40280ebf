package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
)

// GuestHandler serves the public API (docs/api.md) of a host whose trees
// run as guests (Config.Guest). The host answers what is about many trees
// — GET /healthz, GET /v1/sessions (the index), POST /v1/sessions (it
// chooses the tree id, boots the tree's guest, has the guest create the
// root session, and only then makes the tree visible), DELETE of a root
// (stop the guest, remove rows and files) — and forwards every other
// request of a tree to the tree's guest, streaming its answer.
//
// Responses are those of core/api in process: the same statuses and error
// bodies, because every answer the host gives itself is written by an
// api.Handler (over the index, given the error the host met), and the
// guest runs the same handler. Auth is checked twice: by the host, which
// forwards a request only to a tree the caller's principal owns (any other
// tree is 404, as in process), and by the guest, with the same tokens
// (wasm/backend.Config.Boot.API.Tokens).
type GuestHandler struct {
	h     *Host
	auth  api.Authenticator
	front *api.Handler
	mux   *http.ServeMux

	closing context.Context // cancelled by Close: forwarded requests end
	close   context.CancelFunc
}

// NewGuestHandler returns the API handler of h, which must run trees as
// guests. auth must name the principals the guests' tokens name; cfg
// configures what the host answers itself (list pages); the guests'
// handlers are configured by wasm/backend.Config.Boot.API. The Host and Origin
// checks (api.Config.WithLoopbackOnly, WithAllowedOrigins) are the host's,
// from cfg.
func NewGuestHandler(h *Host, auth api.Authenticator, cfg api.Config, log *slog.Logger) (*GuestHandler, error) {
	if h.cfg.Guest == nil {
		return nil, errors.New("new guest handler: the host does not run trees as guests")
	}
	front, err := api.New(api.Deps{Trees: frontTrees{h}, Auth: auth, Clock: h.cfg.Clock, IDs: h.cfg.IDs, Log: log}, cfg)
	if err != nil {
		return nil, err
	}
	g := &GuestHandler{h: h, auth: auth, front: front, mux: http.NewServeMux()}
	g.closing, g.close = context.WithCancel(context.Background())
	g.mux.Handle("/", front) // unknown routes (404), other methods (405)
	for _, rt := range api.Routes {
		var fn http.HandlerFunc
		switch rt.Method + " " + rt.Pattern {
		case "GET /healthz", "GET /v1/sessions":
			fn = front.ServeHTTP
		case "POST /v1/sessions":
			fn = g.create
		default:
			fn = g.tree(rt.Method == "GET" && strings.HasSuffix(rt.Pattern, "/events"))
		}
		g.mux.HandleFunc(rt.Method+" "+rt.Pattern, fn)
	}
	return g, nil
}

// ServeHTTP implements http.Handler. The Host and Origin checks of the
// handler's configuration come first, as in process (api.Handler.Admit).
func (g *GuestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.front.Admit(w, r) {
		return
	}
	g.mux.ServeHTTP(w, r)
}

// Close ends every forwarded request (event streams); the server calls it
// before shutdown.
func (g *GuestHandler) Close() {
	g.close()
	g.front.Close()
}

// tree serves a route of one tree: after auth and the ownership check, a
// root's DELETE is the host's, anything else goes to the tree's guest.
func (g *GuestHandler) tree(queryToken bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		principal, err := g.auth.Authenticate(r, queryToken)
		if err != nil {
			g.front.ServeHTTP(w, r) // the same 401
			return
		}
		id := r.PathValue("id")
		rootID, _, child := strings.Cut(id, ".")
		info, found, err := g.h.treeInfo(r.Context(), rootID)
		switch {
		case err != nil:
			g.fail(w, r, err)
			return
		case !found || info.Principal != principal:
			g.fail(w, r, api.ErrTreeNotFound)
			return
		}
		if r.Method == http.MethodDelete && !child {
			// Deleting must finish even if the client goes away mid-call.
			if err := g.h.Delete(context.WithoutCancel(r.Context()), rootID); err != nil {
				g.fail(w, r, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		gi, release, err := g.h.acquire(r.Context(), rootID)
		if err != nil {
			g.fail(w, r, err)
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
// session from the request. Whatever the guest answers is the answer; the
// tree becomes visible only if that is 201, and is removed otherwise.
func (g *GuestHandler) create(w http.ResponseWriter, r *http.Request) {
	principal, err := g.auth.Authenticate(r, false)
	if err != nil {
		g.front.ServeHTTP(w, r) // the same 401
		return
	}
	id := g.h.cfg.IDs.NewID()
	var resp *recorder
	_, err = g.h.createTree(r.Context(), id, principal, func(e *entry) error {
		gi, ok := e.run.(*guestInstance)
		if !ok {
			return errGuestTrees
		}
		resp = &recorder{header: http.Header{}}
		// As in process, the create finishes even if the client goes away.
		gi.tree.ServeHTTP(resp, guestCredentials(r.WithContext(context.WithoutCancel(r.Context()))))
		if resp.status != http.StatusCreated {
			return errCreateRefused
		}
		return nil
	})
	if resp != nil && (err == nil || errors.Is(err, errCreateRefused)) {
		resp.writeTo(w)
		return
	}
	// The host failed before the guest answered: the body is read, and
	// the front handler only needs a valid one to reach Trees.Create.
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(strings.NewReader("{}"))
	g.fail(w, r2, err)
}

// errCreateRefused: the guest answered a create with something else than
// 201 (an invalid body, say); that answer goes to the client.
var errCreateRefused = errors.New("the guest refused to create the session")

// fail answers err as core/api would: the front handler serves the request
// again (its auth succeeds as it did here) and meets err from frontTrees.
func (g *GuestHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	g.front.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), frontErrKey{}, err)))
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

// frontTrees is api.Trees for the front handler: List is the index; every
// other method answers the error GuestHandler met (frontErrKey), or that
// the tree does not exist.
type frontTrees struct{ h *Host }

type frontErrKey struct{}

func frontErr(ctx context.Context) error {
	if err, ok := ctx.Value(frontErrKey{}).(error); ok {
		return err
	}
	return api.ErrTreeNotFound
}

func (t frontTrees) Create(ctx context.Context, _, _ string, _ func(*core.Instance) error) (*core.Instance, error) {
	return nil, frontErr(ctx)
}

func (t frontTrees) Get(ctx context.Context, _ string) (*core.Instance, api.TreeInfo, error) {
	return nil, api.TreeInfo{}, frontErr(ctx)
}

func (t frontTrees) Owner(ctx context.Context, _ string) (api.TreeInfo, error) {
	return api.TreeInfo{}, frontErr(ctx)
}

func (t frontTrees) List(ctx context.Context, principal, cursor string, limit int) ([]api.TreeInfo, string, error) {
	return t.h.List(ctx, principal, cursor, limit)
}

func (t frontTrees) Delete(ctx context.Context, _ string) error { return frontErr(ctx) }

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
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		out.Header.Set("Authorization", "Bearer "+hexSHA256(token))
	}
	if q := r.URL.Query(); q.Has("access_token") {
		q.Set("access_token", hexSHA256(q.Get("access_token")))
		out.URL.RawQuery = q.Encode()
	}
	return out
}
