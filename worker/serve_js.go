package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"
)

// Bindings of wrangler.toml.
const (
	TreesBinding       = "TREES"       // the Tree objects (durableobject/shim.js), one per tree
	DirectoriesBinding = "DIRECTORIES" // the Directory objects (worker/directory.mjs), one per principal
)

// DirectoryName is the name of principal's Directory object.
func DirectoryName(principal string) string { return "principal:" + principal }

var notFound = &api.Error{Type: api.ErrNotFound, Message: "no such session"}

// Serve runs the front in this Go instance: it sets, on syumai's binding,
// decide (synchronous, no I/O: the hot path of worker/entry.mjs) beside
// syumai's handleRequest (the whole front, I/O included), then blocks.
func Serve(f *Front) {
	binding := js.Global().Get("context").Get("binding")
	binding.Set("decide", js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if p := recover(); p != nil { // a panic escaping a FuncOf ends the program
				slog.Error("front: decide panicked", "panic", p)
				out = answerObject(http.StatusInternalServerError, nil, []byte(`{"error":{"type":"internal","message":"internal error"}}`))
			}
		}()
		return f.decideJS(args[0].String(), args[1].String(), args[2])
	}))
	binding.Set("create", js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if p := recover(); p != nil {
				slog.Error("front: create panicked", "panic", p)
				out = answerObject(http.StatusInternalServerError, nil, []byte(`{"error":{"type":"internal","message":"internal error"}}`))
			}
		}()
		return createJS(args[0])
	}))
	workers.Serve(&server{front: f})
}

// createJS checks a create's body (a Uint8Array; the request's whole body)
// as create does, and mints the tree's root id: {root} when the create
// goes on, {status, headers, body} when it is refused. worker/entry.mjs
// does the I/O (the tree's object, then the caller's directory).
func createJS(body js.Value) any {
	b := make([]byte, body.Get("length").Int())
	js.CopyBytesToGo(b, body)
	if err := CheckCreate(b); err != nil {
		var rec recorder
		api.WriteError(&rec, err)
		return answerObject(rec.statusOr200(), rec.header, rec.body)
	}
	return map[string]any{"root": NewRootID()}
}

// decideJS is Decide for a JS request (method, url, [[name, value], …]):
// {kind, principal, root, url} when it goes on, {status, headers, body}
// when the front has answered.
func (f *Front) decideJS(method, rawURL string, headers js.Value) any {
	r, err := httpmsg.NewRequest(context.Background(), method, rawURL, nil)
	if err != nil {
		return answerObject(http.StatusBadRequest, nil, []byte(`{"error":{"type":"invalid_request","message":"bad request URL"}}`))
	}
	for i, n := 0, headers.Length(); i < n; i++ {
		kv := headers.Index(i)
		r.Header.Add(kv.Index(0).String(), kv.Index(1).String())
	}
	if h := r.Header.Get("Host"); h != "" {
		r.Host = h
	}
	var rec recorder
	d := f.Decide(&rec, r)
	if d.Kind == Answered {
		return answerObject(rec.statusOr200(), rec.header, rec.body)
	}
	return map[string]any{"kind": int(d.Kind), "principal": d.Principal, "root": d.Root, "url": d.URL}
}

func answerObject(status int, h httpmsg.Header, body []byte) any {
	hs := []any{}
	for k, vs := range h {
		for _, v := range vs {
			hs = append(hs, []any{k, v})
		}
	}
	return map[string]any{"status": status, "headers": hs, "body": string(body)}
}

// recorder keeps the answer Decide wrote.
type recorder struct {
	header httpmsg.Header
	status int
	body   []byte
}

func (w *recorder) Header() httpmsg.Header {
	if w.header == nil {
		w.header = httpmsg.Header{}
	}
	return w.header
}
func (w *recorder) WriteHeader(s int) { w.status = s }
func (w *recorder) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return len(b), nil
}
func (w *recorder) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// server is the whole front on syumai's per-request Go instance.
type server struct{ front *Front }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("front: handler panicked", "panic", p)
			api.WriteError(nethttp.Writer(w), &api.Error{Type: api.ErrInternal, Message: "internal error"})
		}
	}()
	if r.Host == "" {
		r.Host = r.URL.Host
	}
	d := s.front.Decide(nethttp.Writer(w), nethttp.Request(r))
	var err error
	switch d.Kind {
	case Answered:
		return
	case Create:
		err = s.create(w, r, d)
	case List:
		err = s.list(w, r, d)
	case Delete:
		err = s.delete(w, r, d)
	case Forward:
		err = s.forward(w, r, d)
	}
	if err != nil {
		if api.Internal(err) {
			slog.Error("front: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		api.WriteError(nethttp.Writer(w), err)
	}
}

// create mints the root id, creates the tree in its own object and records
// it in the caller's directory; a tree that could not be recorded is
// deleted again (best effort) and the answer is 503. A malformed body is
// refused here, before any object exists.
func (s *server) create(w http.ResponseWriter, r *http.Request, d Decision) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, api.DefaultMaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &api.Error{Type: api.ErrPayloadTooLarge, Message: fmt.Sprintf("request body is over %d bytes", api.DefaultMaxBody)}
		}
		return &api.Error{Type: api.ErrInvalidRequest, Message: "could not read the request body"}
	}
	if err := CheckCreate(body); err != nil {
		return err
	}
	root := NewRootID()
	res, err := treeFetch(root, d.Principal, http.MethodPost, "/v1/sessions", r.Header, body)
	if err != nil {
		return err
	}
	if res.Get("status").Int() != http.StatusCreated {
		passThrough(w, res)
		return nil
	}
	q := url.Values{"principal": {d.Principal}, "created_at": {strconv.FormatInt(time.Now().UnixMilli(), 10)}}
	if _, err := directoryFetch(d.Principal, http.MethodPut, "/trees/"+root+"?"+q.Encode(), http.StatusCreated); err != nil {
		slog.Error("front: recording a new tree failed; deleting it", "root", root, "err", err)
		if _, derr := treeFetch(root, d.Principal, http.MethodDelete, "/v1/sessions/"+root, nil, nil); derr != nil {
			slog.Error("front: deleting an unrecorded tree failed", "root", root, "err", derr)
		}
		return &api.Error{Type: api.ErrUnavailable, Message: "the session could not be recorded; try again"}
	}
	passThrough(w, res)
	return nil
}

// listPage is the Directory object's answer to GET /trees.
type listPage struct {
	Trees []struct {
		RootID    string `json:"root_id"`
		CreatedAt int64  `json:"created_at"`
	} `json:"trees"`
	More bool `json:"more"`
}

func (s *server) list(w http.ResponseWriter, r *http.Request, d Decision) error {
	limit, after, err := ParseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != nil {
		q.Set("after_at", strconv.FormatInt(after.CreatedAt, 10))
		q.Set("after_id", after.ID)
	}
	res, err := directoryFetch(d.Principal, http.MethodGet, "/trees?"+q.Encode(), http.StatusOK)
	if err != nil {
		return err
	}
	var page listPage
	if err := json.Unmarshal([]byte(awaitJS(res.Call("text")).String()), &page); err != nil {
		return fmt.Errorf("front: list: %w", err)
	}
	items := make([]api.SessionItem, 0, len(page.Trees))
	for _, t := range page.Trees {
		items = append(items, api.SessionItem{ID: t.RootID, CreatedAt: t.CreatedAt})
	}
	next := ""
	if page.More && len(items) > 0 {
		last := items[len(items)-1]
		next = ListCursor{CreatedAt: last.CreatedAt, ID: last.ID}.Encode()
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]any{"sessions": items, "next_cursor": next})
}

// delete deletes the tree in its object, then its directory row: a crash
// between the two leaves a row whose object answers 404, and deleting it
// again removes the row.
func (s *server) delete(w http.ResponseWriter, r *http.Request, d Decision) error {
	if err := s.owns(d); err != nil {
		return err
	}
	res, err := treeFetch(d.Root, d.Principal, http.MethodDelete, d.URL, r.Header, nil)
	if err != nil {
		return err
	}
	if st := res.Get("status").Int(); st == http.StatusNoContent || st == http.StatusNotFound {
		if _, err := directoryFetch(d.Principal, http.MethodDelete, "/trees/"+d.Root, http.StatusNoContent); err != nil {
			return err
		}
	}
	passThrough(w, res)
	return nil
}

// forward sends a tree route to the tree's object after the owner check;
// the object's answer, an event stream included, passes through as its JS
// body, unbuffered.
func (s *server) forward(w http.ResponseWriter, r *http.Request, d Decision) error {
	if err := s.owns(d); err != nil {
		return err
	}
	var body []byte
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, api.DefaultMaxBody+1))
		if err != nil {
			return &api.Error{Type: api.ErrInvalidRequest, Message: "could not read the request body"}
		}
		body = b // the object applies its own limit
	}
	res, err := treeFetch(d.Root, d.Principal, r.Method, d.URL, r.Header, body)
	if err != nil {
		return err
	}
	passThrough(w, res)
	return nil
}

// owns checks that the caller's directory has the tree: otherwise 404, and
// the tree's object is never touched.
func (s *server) owns(d Decision) error {
	res, err := directoryFetch(d.Principal, http.MethodGet, "/trees/"+d.Root, 0)
	if err != nil {
		return err
	}
	switch res.Get("status").Int() {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return notFound
	default:
		return fmt.Errorf("front: directory answered %d", res.Get("status").Int())
	}
}

// treeFetch sends a request to tree root's object with the front's headers:
// the client's Authorization and any X-Revenant-* it sent are dropped.
func treeFetch(root, principal, method, path string, h http.Header, body []byte) (js.Value, error) {
	headers := js.Global().Get("Headers").New()
	for k, vs := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", TreeHeader, PrincipalHeader, "Content-Length", "Host":
			continue
		}
		for _, v := range vs {
			headers.Call("append", k, v)
		}
	}
	headers.Call("set", TreeHeader, root)
	headers.Call("set", PrincipalHeader, principal)
	return stubFetch(TreesBinding, root, method, path, headers, body)
}

// directoryFetch sends a request to principal's Directory object. want,
// if not 0, is the only status that is not an error.
func directoryFetch(principal, method, path string, want int) (js.Value, error) {
	res, err := stubFetch(DirectoriesBinding, DirectoryName(principal), method, path, js.Global().Get("Headers").New(), nil)
	if err != nil {
		return js.Value{}, err
	}
	if want != 0 && res.Get("status").Int() != want {
		return js.Value{}, fmt.Errorf("front: directory %s %s answered %d", method, path, res.Get("status").Int())
	}
	return res, nil
}

// stubFetch calls fetch on the object named name of binding ns.
func stubFetch(ns, name, method, path string, headers js.Value, body []byte) (res js.Value, err error) {
	defer func() {
		if p := recover(); p != nil { // a JS exception
			res, err = js.Value{}, &api.Error{Type: api.ErrUnavailable, Message: "the session's object did not answer; try again"}
			slog.Error("front: object fetch failed", "binding", ns, "path", path, "err", p)
		}
	}()
	namespace := cloudflare.GetBinding(ns)
	stub := namespace.Call("get", namespace.Call("idFromName", name))
	init := js.Global().Get("Object").New()
	init.Set("method", method)
	init.Set("headers", headers)
	if body != nil {
		b := js.Global().Get("Uint8Array").New(len(body))
		js.CopyBytesToJS(b, body)
		init.Set("body", b)
	}
	req := js.Global().Get("Request").New("https://object"+path, init)
	return awaitJS(stub.Call("fetch", req)), nil
}

// awaitJS waits for a JS promise; a rejection panics with its reason
// (stubFetch recovers it).
func awaitJS(p js.Value) js.Value {
	type result struct {
		v  js.Value
		ok bool
	}
	ch := make(chan result, 1)
	var then, catch js.Func
	then = js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- result{a[0], true}; return nil })
	catch = js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- result{a[0], false}; return nil })
	defer then.Release()
	defer catch.Release()
	p.Call("then", then, catch)
	r := <-ch
	if !r.ok {
		panic(js.Error{Value: r.v})
	}
	return r.v
}

// passThrough answers with res as it is: status, headers, and its body as
// a JS stream, so an event stream is never buffered in Go.
func passThrough(w http.ResponseWriter, res js.Value) {
	entries := js.Global().Get("Array").Call("from", res.Get("headers").Call("entries"))
	for i, n := 0, entries.Length(); i < n; i++ {
		kv := entries.Index(i)
		w.Header().Add(kv.Index(0).String(), kv.Index(1).String())
	}
	w.WriteHeader(res.Get("status").Int())
	if raw, ok := w.(interface{ WriteRawJSBody(js.Value) }); ok && !res.Get("body").IsNull() {
		raw.WriteRawJSBody(res.Get("body"))
	}
}
