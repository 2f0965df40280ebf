//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"net/url"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

// Under Node, fetch answers data: URLs without a network: enough to check
// the transport's conversions and its cancellation (the workerd e2e
// streams a model through it).
func TestFetchRoundTrip(t *testing.T) {
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "data:text/plain,hello%20fetch", nil)
	require.NoError(t, err)
	resp, err := Fetch{}.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, httpmsg.StatusOK, resp.StatusCode)
	require.Same(t, req, resp.Request)
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hello fetch", string(b))
}

func TestFetchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := httpmsg.NewRequest(ctx, httpmsg.MethodGet, "data:text/plain,never", nil)
	require.NoError(t, err)
	_, err = Fetch{}.Do(req)
	require.ErrorIs(t, err, context.Canceled)
}

// fakeReader is a stream reader whose reads the test settles: each read
// pushes its {res, rej} on reads.
func fakeReader() js.Value {
	return js.Global().Call("eval", `(() => {
		const r = { reads: [], read() { return new Promise((res, rej) => r.reads.push({ res, rej })); } };
		return r;
	})()`)
}

// settleRead resolves read i of r with text (done when text is nil).
func settleRead(r js.Value, i int, text *string) {
	if text == nil {
		r.Get("reads").Index(i).Get("res").Invoke(js.Global().Call("eval", `({ done: true })`))
		return
	}
	chunk := jsObject.New()
	chunk.Set("done", false)
	chunk.Set("value", js.Global().Get("TextEncoder").New().Call("encode", *text))
	r.Get("reads").Index(i).Get("res").Invoke(chunk)
}

// testBody is a fetchBody over reader, counting its aborts.
func testBody(ctx context.Context, reader js.Value) (*fetchBody, *int) {
	aborts := 0
	return newFetchBody(ctx, reader, func() { aborts++ }, func() bool { return true }), &aborts
}

// readAsync runs one Read of b in a goroutine and waits until it asked
// the stream (nextTask: every goroutine that could run has run).
func readAsync(b *fetchBody) <-chan readOutcome {
	out := make(chan readOutcome, 1)
	go func() {
		p := make([]byte, 64)
		n, err := b.Read(p)
		out <- readOutcome{string(p[:n]), err}
	}()
	nextTask()
	return out
}

type readOutcome struct {
	text string
	err  error
}

// registered reports whether b still takes settlements.
func registered(b *fetchBody) bool {
	bodiesMu.Lock()
	defer bodiesMu.Unlock()
	return bodies[b.id] == b
}

// A body's reads come back in order, one stream read at a time, then EOF;
// an ended body is forgotten.
func TestFetchBodyReadsChunksInOrder(t *testing.T) {
	r := fakeReader()
	b, aborts := testBody(context.Background(), r)
	for i, want := range []string{"data: one\n\n", "data: two\n\n"} {
		got := readAsync(b)
		require.Equal(t, i+1, r.Get("reads").Length(), "one read out")
		settleRead(r, i, &want)
		o := <-got
		require.NoError(t, o.err)
		assert.Equal(t, want, o.text)
	}
	got := readAsync(b)
	settleRead(r, 2, nil)
	o := <-got
	assert.ErrorIs(t, o.err, io.EOF)
	assert.False(t, registered(b), "an ended body takes no settlements")
	require.NoError(t, b.Close())
	assert.Equal(t, 1, *aborts, "Close aborts (a no-op on an ended fetch)")
}

// A rejected read is the body's error, and stays it.
func TestFetchBodyRejectedRead(t *testing.T) {
	r := fakeReader()
	b, _ := testBody(context.Background(), r)
	got := readAsync(b)
	r.Get("reads").Index(0).Get("rej").Invoke(jsError.New("network lost"))
	o := <-got
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "network lost")
	_, err := b.Read(make([]byte, 8))
	assert.Equal(t, o.err, err)
	assert.Equal(t, 1, r.Get("reads").Length(), "no read after the error")
}

// waitRead is a Read's outcome; the deadline only keeps a broken build
// from hanging the test binary (a Read that never ends fails).
func waitRead(t *testing.T, got <-chan readOutcome) readOutcome {
	t.Helper()
	select {
	case o := <-got:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("the Read did not end")
		return readOutcome{}
	}
}

// Close ends a Read waiting on the stream and aborts the fetch; the
// read's settlement arriving afterwards does nothing (no callback of a
// released js.Func, no data read after Close).
func TestFetchBodyCloseEndsPendingRead(t *testing.T) {
	r := fakeReader()
	b, aborts := testBody(context.Background(), r)
	released := countReleasedCalls(t)
	got := readAsync(b)
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	o := waitRead(t, got)
	require.NoError(t, <-closed)
	assert.Error(t, o.err)
	assert.Equal(t, 1, *aborts)
	assert.False(t, registered(b))

	late := "late"
	settleRead(r, 0, &late)
	nextTask() // the settlement's callback ran
	n, err := b.Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.Error(t, err)
	assert.Zero(t, released(), "no call to a released js.Func")
}

// The request's context ends a Read waiting on the stream, with its
// cause; a settlement arriving afterwards does nothing.
func TestFetchBodyContextEndsPendingRead(t *testing.T) {
	released := countReleasedCalls(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := fakeReader()
	b, _ := testBody(ctx, r)
	got := readAsync(b)
	cancel()
	o := waitRead(t, got)
	assert.ErrorIs(t, o.err, context.Canceled)
	late := "late"
	settleRead(r, 0, &late)
	nextTask()
	_, err := b.Read(make([]byte, 8))
	assert.ErrorIs(t, err, context.Canceled, "the error stays")
	assert.Equal(t, 1, r.Get("reads").Length())
	require.NoError(t, b.Close())
	assert.Zero(t, released(), "no call to a released js.Func")
}

// awaitCtx gives up when its context ends, and the promise settling
// afterwards calls no released js.Func (which would end the program).
func TestAwaitCtxGivesUpThenSettles(t *testing.T) {
	released := countReleasedCalls(t)
	d := js.Global().Call("eval", `(() => { const d = {}; d.p = new Promise((res) => (d.res = res)); return d; })()`)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := awaitCtx(ctx, d.Get("p"))
		got <- err
	}()
	nextTask()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)
	d.Get("res").Invoke("late")
	nextTask() // the settlement's callback ran, and the program goes on
	v, err := awaitCtx(context.Background(), js.Global().Get("Promise").Call("resolve", 7))
	require.NoError(t, err)
	assert.Equal(t, 7, v.Int())
	assert.Zero(t, released(), "no call to a released js.Func")
}

// countReleasedCalls counts, from now until the test ends, the calls to a
// released js.Func: syscall/js logs them on console.error ("call to
// released function") rather than failing.
func countReleasedCalls(t *testing.T) func() int {
	console := js.Global().Get("console")
	orig := console.Get("error")
	c := js.Global().Call("eval", `(() => {
		const c = { n: 0 };
		c.wrap = (orig) => function (...args) {
			if (String(args[0]).includes("released function")) c.n++;
			return orig.apply(this, args);
		};
		return c;
	})()`)
	console.Set("error", c.Call("wrap", orig))
	t.Cleanup(func() { console.Set("error", orig) })
	return func() int { return c.Get("n").Int() }
}

// The transport never follows a redirect itself: fetch is asked for
// redirect "manual", and a 3xx comes back as it is, Location included,
// for the http_request tool to check and follow hop by hop.
func TestFetchNeverFollowsRedirects(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	stub := js.Global().Call("eval", `(() => {
		const f = (url, init) => {
			f.redirect = init.redirect;
			if (init.redirect !== "manual") return Promise.resolve(new Response("followed", { status: 200 }));
			return Promise.resolve(new Response(null, { status: 302, headers: { location: "http://10.0.0.1/" } }));
		};
		return f;
	})()`)
	jsFetch = stub
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://example.com/", nil)
	require.NoError(t, err)
	resp, err := Fetch{}.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "manual", stub.Get("redirect").String())
	require.Equal(t, httpmsg.StatusFound, resp.StatusCode)
	require.Equal(t, "http://10.0.0.1/", resp.Header.Get("Location"))
}

// A webhook's delivery reaches the platform's fetch whole: its method,
// its headers (the signature) and its body. Under Node a data: URL takes
// no body, so a stand-in fetch records what it was given.
func TestFetchSendsMethodHeadersAndBody(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	stub := js.Global().Call("eval", `(() => {
		const f = (url, init) => {
			f.url = url;
			f.method = init.method;
			f.signature = new Headers(init.headers).get("x-signature");
			f.body = init.body === undefined ? "(none)" : new TextDecoder().decode(init.body);
			return Promise.resolve(new Response(null, { status: 204 }));
		};
		return f;
	})()`)
	jsFetch = stub
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodPost, "https://hooks.example/ledger", strings.NewReader(`{"amount":5}`))
	require.NoError(t, err)
	req.Header.Set("X-Signature", "sha256=abc")
	resp, err := Fetch{}.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, httpmsg.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "https://hooks.example/ledger", stub.Get("url").String())
	assert.Equal(t, "POST", stub.Get("method").String())
	assert.Equal(t, "sha256=abc", stub.Get("signature").String())
	assert.Equal(t, `{"amount":5}`, stub.Get("body").String())
}

// A request whose context ends aborts the platform's fetch (its
// AbortController), so an abandoned provider or tool call stops costing a
// connection; Do itself returns with the context's error.
func TestFetchAbortsWhenTheContextEnds(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	aborted := make(chan struct{})
	onAbort := js.FuncOf(func(js.Value, []js.Value) any { close(aborted); return nil })
	defer onAbort.Release()
	jsFetch = js.Global().Call("eval", `(onAbort) => (url, init) => {
		init.signal.addEventListener("abort", () => onAbort());
		return new Promise(() => {}); // never answers
	}`).Invoke(onAbort)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := httpmsg.NewRequest(ctx, httpmsg.MethodGet, "https://example.com/", nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := Fetch{}.Do(req); done <- err }()
	waitIdle()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	select {
	case <-aborted:
	case <-time.After(5 * time.Second): // a bound, not a timing: abort comes at once or never
		t.Fatal("the fetch was not aborted")
	}
}

// A fetch that throws rather than rejects fails the request with the
// exception's reason, as a rejection does: no panic reaches the tool.
func TestFetchThatThrowsFailsTheRequest(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	jsFetch = js.Global().Call("eval", `(url, init) => { throw new TypeError("Invalid header value."); }`)
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodGet, "https://example.com/", nil)
	require.NoError(t, err)
	_, err = Fetch{}.Do(req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Invalid header value.")
	var ue *url.Error
	assert.ErrorAs(t, err, &ue, "as a rejection's: tools/web tells the model the reason alone")
}

// A URL's password (a provider's base URL given as
// https://user:password@host/) never shows in a failed fetch's error,
// which a model's client may log or tell the session: redacted as the
// local server's net/http redacts it (url.URL.Redacted).
func TestFetchFailureRedactsTheURLsPassword(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	jsFetch = js.Global().Call("eval", `(url, init) => Promise.reject(new TypeError("Network connection lost."))`)
	req, err := httpmsg.NewRequest(context.Background(), httpmsg.MethodPost, "https://user:PASSWORDSECRET@models.example.com/v1/chat/completions", nil)
	require.NoError(t, err)
	_, err = Fetch{}.Do(req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Network connection lost.")
	assert.NotContains(t, err.Error(), "PASSWORDSECRET")
	assert.Contains(t, err.Error(), "models.example.com", "the host is still named, as net/http names it")
}

// A webhook's URL is the operator's and may hold its secret in the path
// or query (a Slack-style hook URL): a failed fetch is told to the model,
// and so stored in the event log and shown to every reader of the
// session, as the platform's reason alone, as the local server's net/http
// does (tools/web strips *url.Error), never with the URL.
func TestFetchFailureKeepsTheWebhookURLOut(t *testing.T) {
	real := jsFetch
	defer func() { jsFetch = real }()
	jsFetch = js.Global().Call("eval", `(url, init) => Promise.reject(new TypeError("Network connection lost."))`)
	hook, err := web.NewWebhook(web.WebhookSpec{
		Name: "hook", URL: "https://hooks.example.com/services/T0/B0/PATHSECRET?token=QUERYSECRET",
		Secret: web.NewSecret("a-signing-secret-of-some-length"),
	}, web.NewEgress().WithTransport(Fetch{}))
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), tool.Call{ID: "c", Name: "hook", Arguments: []byte(`{}`), IdempotencyKey: "k"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Network connection lost.")
	assert.NotContains(t, err.Error(), "PATHSECRET")
	assert.NotContains(t, err.Error(), "QUERYSECRET")
}
