package worker

import (
	"context"
	"encoding/json"
	"os"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
)

// stdLog writes the lines slog's default logger would (package log's
// standard format, to stderr), without linking log/slog (core/logs).
var stdLog = logs.New(logs.NewLogHandler(os.Stderr, time.Now))

// internalError is the answer of an entry point that panicked or of a
// state the front cannot explain to the client.
var internalError = []byte(`{"error":{"type":"internal","message":"internal error"}}`)

// Serve runs the front in this Go instance, the isolate's one long-lived
// front (worker/entry.mjs): it sets the entry points on bridge, then
// blocks. Each is synchronous and does no I/O; entry.mjs does the fetches
// they decide on. An answer object is {status, headers: [[name, value],
// …], body}.
//
//	decide(method, url, [[name, value], …]) → decision | answer
//	create(body: Uint8Array, keys: [string]) → {root, key?, digest?} | answer
//	                                            (the body and the Idempotency-Key checked, the root id minted)
//	keyed(key, digest, record: string) → answer (a create whose key the Directory knows: KeyAnswer)
//	page(directoryBody: string) → answer        (the list's 200 from the Directory's page)
//
// testBuild is true only in the e2e tests' build (revenant_testroutes).
//
// A decision is {kind, principal, root, url, maxBody, headers, child, tooLarge, bodiless, keys}:
// maxBody is the body cap (entry.mjs reads at most one byte past it);
// headers are [[name, value], …] every answer to the request carries (the
// CORS headers of an allowed Origin); tooLarge, when set, is the 413 answer
// for a declared Content-Length over the cap; child, that a Delete names a
// child's id; bodiless, that the route reads no body (none is sent on or
// waited for: entry.mjs's ignoreBody); keys, a create's Idempotency-Key
// values (for create).
func Serve(bridge js.Value, f *Front) {
	bridge.Set("decide", entry("decide", func(args []js.Value) any {
		return f.decideJS(args[0].String(), args[1].String(), args[2])
	}))
	bridge.Set("create", entry("create", func(args []js.Value) any { return f.createJS(args[0], args[1]) }))
	bridge.Set("keyed", entry("keyed", func(args []js.Value) any {
		return keyedJS(args[0].String(), args[1].String(), args[2].String())
	}))
	bridge.Set("page", entry("page", func(args []js.Value) any { return pageJS(args[0].String()) }))
	bridge.Set("testBuild", testBuild)
	select {}
}

// entry wraps an entry point: a panic escaping a js.FuncOf ends the Go
// program (and with it the isolate's front), so it is recovered and
// answered 500.
func entry(name string, fn func([]js.Value) any) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if p := recover(); p != nil {
				stdLog.Error("front: entry point panicked", "entry", name, "panic", p)
				out = answerObject(httpmsg.StatusInternalServerError, jsonHeader(), internalError)
			}
		}()
		return fn(args)
	})
}

// createJS checks a create's body (a Uint8Array: the request's body, read
// up to one byte past the cap) and mints the tree's root id: {root} when
// the create goes on, an answer when it is refused. A body over the cap is
// refused before a byte of it is copied into Go. entry.mjs does the I/O
// (the tree's object, then the caller's directory).
func (f *Front) createJS(body, keys js.Value) any {
	n := int64(body.Get("length").Int())
	if n > f.maxBody {
		return errorAnswer(f.TooLarge())
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, body)
	if err := f.CheckCreate(b); err != nil {
		return errorAnswer(err)
	}
	values := make([]string, keys.Length())
	for i := range values {
		values[i] = keys.Index(i).String()
	}
	key, err := f.CreateKey(values, b)
	if err != nil {
		return errorAnswer(err)
	}
	out := map[string]any{"root": NewRootID()}
	if key != nil {
		out["key"], out["digest"] = key.Key, key.Digest
	}
	return out
}

// keyedJS is KeyAnswer for a create under key (its body's digest) and the
// caller's Directory's record of the key (JSON: KeyRecord), as an answer.
func keyedJS(key, digest, record string) any {
	var rec KeyRecord
	if err := json.Unmarshal([]byte(record), &rec); err != nil || rec.RootID == "" {
		stdLog.Error("front: a create key's record does not parse", "err", err)
		return answerObject(httpmsg.StatusInternalServerError, jsonHeader(), internalError)
	}
	var w recorder
	KeyAnswer(&w, api.CreateKey{Key: key, Digest: digest}, rec)
	return answerObject(w.statusOr200(), w.header, w.body)
}

// errorAnswer is the API's answer for err, as an answer object.
func errorAnswer(err error) any {
	var rec recorder
	api.WriteError(&rec, err)
	return answerObject(rec.statusOr200(), rec.header, rec.body)
}

// pageJS is ListAnswer for the Directory's page, as an answer.
func pageJS(directory string) any {
	body, err := ListAnswer([]byte(directory))
	if err != nil {
		stdLog.Error("front: list", "err", err)
		return answerObject(httpmsg.StatusInternalServerError, jsonHeader(), internalError)
	}
	return answerObject(httpmsg.StatusOK, jsonHeader(), body)
}

// decideJS is Decide for a JS request (method, url, [[name, value], …]):
// {kind, principal, root, url} when it goes on, an answer when the front
// has answered.
func (f *Front) decideJS(method, rawURL string, headers js.Value) any {
	r, err := httpmsg.NewRequest(context.Background(), method, rawURL, nil)
	if err != nil {
		return answerObject(httpmsg.StatusBadRequest, jsonHeader(), []byte(`{"error":{"type":"invalid_request","message":"bad request URL"}}`))
	}
	for i, n := 0, headers.Length(); i < n; i++ {
		kv := headers.Index(i)
		r.Header.AddReceived(kv.Index(0).String(), kv.Index(1).String())
	}
	if h := r.Header.Get("Host"); h != "" {
		r.Host = h
	}
	var rec recorder
	d := f.Decide(&rec, r)
	if d.Kind == Answered {
		return answerObject(rec.statusOr200(), rec.header, rec.body)
	}
	out := map[string]any{"kind": int(d.Kind), "principal": d.Principal, "root": d.Root, "url": d.URL,
		"maxBody": f.maxBody, "headers": headerPairs(rec.header), "child": d.Child}
	if d.TooLarge {
		out["tooLarge"] = errorAnswer(f.TooLarge())
	}
	if d.Bodiless {
		out["bodiless"] = true
	}
	if d.Kind == Create {
		keys := make([]any, len(d.Keys))
		for i, k := range d.Keys {
			keys[i] = k
		}
		out["keys"] = keys // create's second argument: always an array
	}
	return out
}

// jsonHeader is the header of a JSON answer the front writes itself, as
// core/api writes its own (docs/api.md: every JSON response is nosniff),
// and no-store: a list page is a principal's ids.
func jsonHeader() httpmsg.Header {
	return httpmsg.Header{"Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}, "Cache-Control": {"no-store"}}
}

// answerObject is an answer for entry.mjs's answer(): {status, headers,
// body}. An empty body is null, not "": a Response of a null-body status
// (a preflight's 204) given a body, even an empty one, is "technically
// incorrect" to workerd, which logs a warning for every such answer.
func answerObject(status int, h httpmsg.Header, body []byte) any {
	var b any // null
	if len(body) > 0 {
		b = string(body)
	}
	return map[string]any{"status": status, "headers": headerPairs(h), "body": b}
}

// headerPairs is h as [[name, value], …].
func headerPairs(h httpmsg.Header) []any {
	hs := []any{}
	for k, vs := range h {
		for _, v := range vs {
			hs = append(hs, []any{k, v})
		}
	}
	return hs
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
		return httpmsg.StatusOK
	}
	return w.status
}
