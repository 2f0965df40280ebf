package worker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// Headers the front sets on every request it forwards to a tree's object,
// after removing any a client sent. The object trusts them: only the front
// can reach it.
const (
	TreeHeader      = "X-Revenant-Tree"
	PrincipalHeader = "X-Revenant-Principal"
)

// MaxIDLen is the longest id part (host.ValidTreeID's rule).
const MaxIDLen = 64

// Kind is what the front does with a request once Decide admitted it.
type Kind int

const (
	Answered Kind = iota // Decide wrote the answer (an error, or /healthz)
	Create               // POST /v1/sessions: mint a root id, create the tree, record it
	List                 // GET /v1/sessions: the caller's directory
	Delete               // DELETE /v1/sessions/{id}: owner check of its root, the object (which refuses a child's id), the directory row
	Forward              // any other /v1/sessions/{id}/… route: owner check, then the tree's object
)

// Decision is a request admitted by Decide: who asks, and for which tree.
type Decision struct {
	Kind      Kind
	Principal string
	Root      string // the tree (Delete, Forward): the id's part before the first "."
	// URL is the path and query to forward (Forward, Delete): the request's,
	// without access_token. For List, the caller's Directory's
	// (DirectoryListPath).
	URL string
	// Child: a Delete names a child's id (the object refuses it, 400).
	Child bool
	// TooLarge: a request to a route that reads a body (api.Route.ReadsBody)
	// whose declared Content-Length is over the cap. The
	// answer is f.TooLarge(), given where the local server reads the body
	// (after the owner check for a tree's route); the body is never read.
	TooLarge bool
	// Bodiless: the route reads no body (an interrupt; api.Route.ReadsBody).
	// The front sends the object none and waits for none (entry.mjs's
	// ignoreBody throws away what comes while the object answers, and gives
	// the rest up half a second after): a body declared and held back would
	// otherwise hold the answer until the client gave up, where the local
	// server answers at once.
	Bodiless bool
	// Keys are a Create's Idempotency-Key header values (CreateKey checks
	// them once the body is read, as the local server does).
	Keys []string
}

// Front is the front Worker's logic, with no I/O: the checks that come
// before any object is touched. worker/entry.mjs does the I/O it decides
// on (serve_js.go is the bridge).
type Front struct {
	auth    api.Authenticator
	admit   *api.Directory // only its Admit: the Host, Origin and clean-path checks every host applies
	mux     *route.Mux     // api.Routes, to name a request's route
	maxBody int64
	// listLimit is a list page's size when the request gives no limit.
	listLimit int
}

// Options configure the front from the Worker's vars and secrets.
type Options struct {
	// Tokens is REVENANT_TOKENS. Empty, the front serves the one
	// anonymous principal and, like the local server, answers only
	// requests addressed to a loopback Host (wrangler dev): a deployed
	// front without tokens refuses every request rather than serve
	// everyone.
	Tokens string
	// AllowedOrigins are the browser origins whose pages may call the API
	// (REVENANT_ALLOWED_ORIGINS, read with api.ParseOrigins): they get the
	// local server's CORS answers. None: a request with an Origin is 403.
	AllowedOrigins []string
	// MaxBody caps request bodies (bytes), the trees' max_body setting;
	// zero is api.DefaultMaxBody.
	MaxBody int64
	// ListLimit is how many sessions a list page holds when the request
	// names no limit, the trees' session_page_size setting; zero is
	// api.DefaultListLimit.
	ListLimit int
}

// New returns the front for o.
func New(o Options) (*Front, error) {
	var auth api.Authenticator = api.Anonymous{}
	if o.Tokens != "" {
		// Set but blank (" ") is refused, as the local server refuses it:
		// a secret holding no token is a mistake, not a wish to serve
		// anonymously.
		t, err := api.ParseTokens(o.Tokens)
		if err != nil {
			return nil, err
		}
		auth = t
	}
	cfg := api.NewConfig().WithLoopbackOnly(auth == api.Anonymous{}).WithAllowedOrigins(o.AllowedOrigins...)
	admit, err := api.NewDirectory(api.DirectoryDeps{Index: noIndex{}, Auth: auth, IDs: randomIDs{}}, cfg)
	if err != nil {
		return nil, err
	}
	maxBody := o.MaxBody
	if maxBody <= 0 {
		maxBody = api.DefaultMaxBody
	}
	listLimit := o.ListLimit
	if listLimit <= 0 {
		listLimit = api.DefaultListLimit
	}
	f := &Front{auth: auth, admit: admit, mux: &route.Mux{}, maxBody: maxBody, listLimit: listLimit}
	for _, rt := range append(api.Routes[:len(api.Routes):len(api.Routes)], testRoutes...) {
		f.mux.HandleFunc(rt.Method+" "+rt.Pattern, nil)
	}
	return f, nil
}

// Decide applies, in order, the Host/Origin/path checks, the route, the
// caller's token and the id's form (a list: its limit and cursor). When it
// refuses (or serves /healthz) it writes the answer to w and returns Kind
// Answered; nothing has touched an object then.
func (f *Front) Decide(w httpmsg.ResponseWriter, r *httpmsg.Request) Decision {
	if !f.admit.Admit(w, r) {
		return Decision{}
	}
	_, pattern := f.mux.Handler(r)
	if pattern == "" {
		api.Unrouted(w, r)
		return Decision{}
	}
	route := routeOf(pattern)
	if route.Pattern == "/healthz" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(httpmsg.StatusOK)
		_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		return Decision{}
	}
	principal, err := f.auth.Authenticate(r, route.QueryToken())
	if err != nil {
		api.WriteError(w, err)
		return Decision{}
	}
	d := Decision{Principal: principal, TooLarge: route.ReadsBody() && declaredLength(r) > f.maxBody, Bodiless: !route.ReadsBody()}
	switch {
	case route.Pattern == "/v1/sessions" && r.Method == httpmsg.MethodPost:
		// A compressed create is refused here, as core/api's readBody
		// refuses it before the body is read (CheckCreate sees only the
		// body); a tree's route carries the header to its object, which
		// refuses it there, after the owner check, as the local server does.
		// A declared length over the cap is judged first, as readBody
		// judges it: entry.mjs answers it 413 (d.TooLarge), as on a tree's
		// route, so the encoding is not checked then.
		if err := api.CheckBodyEncoding(r); err != nil && !d.TooLarge {
			api.WriteError(w, err)
			return Decision{}
		}
		d.Kind, d.Keys = Create, r.Header.Values(api.IdempotencyKeyHeader)
		return d
	case route.Pattern == "/v1/sessions":
		limit, after, err := ParseListQuery(r.URL.Query(), f.listLimit)
		if err != nil {
			api.WriteError(w, err)
			return Decision{}
		}
		d.Kind, d.URL = List, DirectoryListPath(limit, after)
		return d
	}
	id := pathID(r.URL)
	if r.Method == httpmsg.MethodDelete {
		// A delete names a tree by the id's root, as the local server's
		// does: the owner check comes first (404 for a tree the caller does
		// not own, whatever follows the "."), then the tree's object
		// refuses a child's id (400), as core/api's delete does.
		root, _, child := strings.Cut(id, ".")
		if !validPart(root) {
			api.WriteError(w, &api.Error{Type: api.ErrNotFound, Message: "no such session"})
			return Decision{}
		}
		d.Root, d.URL, d.Kind, d.Child = root, forwardURL(r.URL), Delete, child
		return d
	}
	root, ok := ValidID(id)
	if !ok {
		api.WriteError(w, &api.Error{Type: api.ErrNotFound, Message: "no such session"})
		return Decision{}
	}
	d.Root, d.URL, d.Kind = root, forwardURL(r.URL), Forward
	return d
}

// declaredLength is the request's Content-Length, -1 if it has none (or
// one that does not parse: the platform refused such a request already).
func declaredLength(r *httpmsg.Request) int64 {
	if r.ContentLength > 0 {
		return r.ContentLength
	}
	n, err := strconv.ParseInt(strings.TrimSpace(r.Header.Get("Content-Length")), 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		return math.MaxInt64 // digits past int64: over any cap
	}
	if err != nil {
		return -1
	}
	return n
}

// pathID is the {id} of a /v1/sessions/{id}… path, unescaped as the
// router matches it ("" if it cannot be unescaped: no valid id).
func pathID(u *url.URL) string {
	segs := strings.SplitN(u.EscapedPath(), "/", 5) // "", "v1", "sessions", id, rest
	if len(segs) < 4 {
		return ""
	}
	id, err := url.PathUnescape(segs[3])
	if err != nil {
		return ""
	}
	return id
}

// routeOf returns the documented route of a mux pattern ("GET /v1/…").
func routeOf(pattern string) api.Route {
	method, p, _ := strings.Cut(pattern, " ")
	return api.Route{Method: method, Pattern: p}
}

// ValidID returns the root of a session id (the part before the first
// ".") and whether every "."-separated part is 1–64 ASCII letters, digits,
// '-' or '_' (host.ValidTreeID's rule): the only ids that reach idFromName.
func ValidID(id string) (root string, ok bool) {
	for i, part := range strings.Split(id, ".") {
		if !validPart(part) {
			return "", false
		}
		if i == 0 {
			root = part
		}
	}
	return root, true
}

func validPart(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// forwardURL is the path and query the object gets: the client's, minus
// access_token (the front has used it; the object never sees a secret).
func forwardURL(u *url.URL) string {
	out := u.EscapedPath()
	if u.RawQuery == "" {
		return out
	}
	q := u.Query()
	if !q.Has("access_token") {
		return out + "?" + u.RawQuery
	}
	q.Del("access_token")
	if len(q) == 0 {
		return out
	}
	return out + "?" + q.Encode()
}

// MaxBody is the request body cap (bytes): entry.mjs reads no more than
// one byte past it, and a body over it is TooLarge.
func (f *Front) MaxBody() int64 { return f.maxBody }

// TooLarge is the API's refusal of a body over the cap, in the words of
// the local server's (core/api reads at most the cap and one byte; a test
// holds the two answers equal).
func (f *Front) TooLarge() error {
	return &api.Error{Type: api.ErrPayloadTooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", f.maxBody)}
}

// CheckCreate refuses a create's body before any object exists: over the
// cap (413), or not a create the API accepts (400).
func (f *Front) CheckCreate(body []byte) error {
	if int64(len(body)) > f.maxBody {
		return f.TooLarge()
	}
	_, err := api.DecodeCreate(body)
	return err
}

// CreateKey reads a create's Idempotency-Key (the Decision's Keys) once
// its body passed CheckCreate: nil when there is none, 400 when it is
// malformed (api.ParseCreateKey).
func (f *Front) CreateKey(keys []string, body []byte) (*api.CreateKey, error) {
	return api.ParseCreateKey(keys, body)
}

// KeyRecord is what the caller's Directory holds for a create key
// (directory.mjs: GET /keys, or a PUT's 409 when a create with the same
// key was recorded first).
type KeyRecord struct {
	RootID string `json:"root_id"`
	Digest string `json:"digest"`
	Exists bool   `json:"exists"` // the key's tree still has its row (it was not deleted)
}

// KeyAnswer answers a create whose key the caller's Directory knows
// already, as the local server does (api.KeyedIndex): 201 with the key's
// tree for the same body, 409 for another body, 409 when the tree was
// deleted. Nothing is created.
func KeyAnswer(w httpmsg.ResponseWriter, key api.CreateKey, rec KeyRecord) {
	switch {
	case rec.Digest != key.Digest:
		api.WriteError(w, api.KeyReused(key.Key))
	case !rec.Exists:
		api.WriteError(w, api.KeySpent(key.Key, rec.RootID))
	default:
		api.WriteCreated(w, rec.RootID)
	}
}

// NewRootID mints a root session id as the local server does
// (host.RandomIDs): 128 random bits, 26 lowercase base32 characters.
func NewRootID() string { return strings.ToLower(rand.Text()) }

// ParseListQuery reads GET /v1/sessions' limit and cursor as the local
// server does (a missing limit is defaultLimit, the session_page_size
// setting; 1 to api.MaxListLimit; a cursor this front returned). A nil
// cursor is the first page.
func ParseListQuery(q url.Values, defaultLimit int) (limit int, after *api.ListCursor, err error) {
	if limit, err = api.IntParam(q.Get("limit"), "limit", defaultLimit, 1, api.MaxListLimit); err != nil {
		return 0, nil, err
	}
	s := q.Get("cursor")
	if s == "" {
		return limit, nil, nil
	}
	c, ok := api.ParseListCursor(s, validPart)
	if !ok {
		return 0, nil, &api.Error{Type: api.ErrInvalidRequest, Message: fmt.Sprintf("cursor %q is not one this server returned", core.Clip(s))}
	}
	return limit, &c, nil
}

// noIndex is the index of the Directory New keeps for Admit alone: the
// front's directory is the Directory objects (directory.mjs), and Admit
// never consults an index.
type noIndex struct{ api.Index }

func (noIndex) Owner(context.Context, string) (api.TreeInfo, error) {
	return api.TreeInfo{}, api.ErrTreeNotFound
}

type randomIDs struct{}

func (randomIDs) NewID() string { return NewRootID() }
