package web_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

const secret = "s3cret-s3cret-s3cret"

func hookSpec(url string) web.WebhookSpec {
	return web.WebhookSpec{
		Name:        "deploy",
		Description: "Deploy a service.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"service":{"type":"string"}}}`),
		URL:         url,
		Secret:      web.NewSecret(secret),
		Permission:  "ask",
	}
}

func hookCall(key string) tool.Call {
	return tool.Call{ID: "call-7", Name: "deploy", Arguments: json.RawMessage(`{"service": "api", "n": 1}`), IdempotencyKey: key, SessionID: "s1"}
}

// specSignature is the webhook-signature value the Standard Webhooks
// specification defines, written here from the specification and
// independent of package web: "v1," and the base64 HMAC-SHA256 of
// "id.timestamp.body" under the secret (base64-decoded after "whsec_").
func specSignature(t *testing.T, secret, id, timestamp string, body []byte) string {
	t.Helper()
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		key, err = base64.StdEncoding.DecodeString(rest)
		require.NoError(t, err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "." + string(body)))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// specVerifies is a receiver's check by the specification: one of the
// space-separated signatures is the expected one.
func specVerifies(t *testing.T, secret string, h http.Header, body []byte) bool {
	want := specSignature(t, secret, h.Get("webhook-id"), h.Get("webhook-timestamp"), body)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// clock is a settable clock for the webhook's send time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestWebhookSendsSignedRequest(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"deployed":true}`)
	})
	hook, err := web.NewWebhook(hookSpec(srv.URL+"/hooks/deploy"), srv.allowing())
	require.NoError(t, err)
	sent := time.Unix(1_700_000_000, 0)
	hook = hook.WithClock(func() time.Time { return sent })

	out, err := hook.Execute(context.Background(), hookCall("key-42"))
	require.NoError(t, err)
	require.Equal(t, `{"deployed":true}`, out)

	r, body := srv.requests()[0], []byte(srv.bodies()[0])
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/hooks/deploy", r.URL.Path)
	require.Equal(t, `{"service": "api", "n": 1}`, string(body), "the arguments are sent exactly as given")
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Equal(t, "key-42", r.Header.Get("Idempotency-Key"))
	require.Equal(t, "call-7", r.Header.Get("X-Revenant-Call-Id"))
	require.Empty(t, r.Header.Get("X-Revenant-Signature"), "the body-only signature is gone")

	require.Equal(t, "key-42", r.Header.Get("webhook-id"), "the delivery id is the idempotency key")
	require.Equal(t, "1700000000", r.Header.Get("webhook-timestamp"))
	require.Equal(t, specSignature(t, secret, "key-42", "1700000000", body), r.Header.Get("webhook-signature"))
	require.True(t, specVerifies(t, secret, r.Header, body), "a receiver following the specification accepts it")
	require.NoError(t, web.Verify([]byte(secret), r.Header, body, sent.Add(web.Tolerance)))

	require.False(t, specVerifies(t, "another-secret-of-length", r.Header, body))
	require.False(t, specVerifies(t, secret, r.Header, append(body, ' ')))
	require.ErrorIs(t, web.Verify([]byte("another-secret-of-length"), r.Header, body, sent), web.ErrUnverified)
	require.ErrorIs(t, web.Verify([]byte(secret), r.Header, append(body, ' '), sent), web.ErrUnverified)
}

// TestWebhookEmptyArgumentsSendAnEmptyObject: a model may call a tool
// that takes no parameters with no arguments at all; the receiver gets
// "{}" (JSON, as every delivery is), and the signature covers those bytes.
func TestWebhookEmptyArgumentsSendAnEmptyObject(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	hook, err := web.NewWebhook(hookSpec(srv.URL), srv.allowing())
	require.NoError(t, err)
	for _, args := range []string{"", " \n"} {
		call := hookCall("key-" + strconv.Itoa(len(args)))
		call.Arguments = json.RawMessage(args)
		_, err := hook.Execute(context.Background(), call)
		require.NoError(t, err, "arguments %q", args)
	}
	for i, body := range srv.bodies() {
		require.Equal(t, "{}", body)
		r := srv.requests()[i]
		require.NoError(t, web.Verify([]byte(secret), r.Header, []byte(body), time.Now()))
	}
	require.Len(t, srv.bodies(), 2)
}

// TestWebhookReplayRefused: a captured delivery cannot be replayed. Sent
// again as it is, it is stale once the tolerance has passed; with a fresh
// timestamp, its signature no longer matches; with another id (to slip past
// deduplication), neither.
func TestWebhookReplayRefused(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	hook, err := web.NewWebhook(hookSpec(srv.URL), srv.allowing())
	require.NoError(t, err)
	sent := time.Unix(1_700_000_000, 0)
	_, err = hook.WithClock(func() time.Time { return sent }).Execute(context.Background(), hookCall("key-1"))
	require.NoError(t, err)
	captured, body := srv.requests()[0].Header, []byte(srv.bodies()[0])
	require.NoError(t, web.Verify([]byte(secret), captured, body, sent))

	later := sent.Add(web.Tolerance + time.Second)
	err = web.Verify([]byte(secret), captured, body, later)
	require.ErrorIs(t, err, web.ErrUnverified)
	require.EqualError(t, err, "webhook not verified: webhook-timestamp is 5m1s from now, more than 5m0s")
	require.ErrorIs(t, web.Verify([]byte(secret), captured, body, sent.Add(-web.Tolerance-time.Second)), web.ErrUnverified, "nor from the future")

	fresh := captured.Clone()
	fresh.Set("webhook-timestamp", strconv.FormatInt(later.Unix(), 10))
	require.False(t, specVerifies(t, secret, fresh, body), "the timestamp is signed")
	err = web.Verify([]byte(secret), fresh, body, later)
	require.EqualError(t, err, "webhook not verified: no v1 signature in webhook-signature matches")

	otherID := captured.Clone()
	otherID.Set("webhook-id", "key-2")
	require.False(t, specVerifies(t, secret, otherID, body), "the id is signed")
	require.ErrorIs(t, web.Verify([]byte(secret), otherID, body, sent), web.ErrUnverified)
}

// TestWebhookIdempotencyKeyStable: the runner re-executes an idempotent
// call found `executing` after a crash with the same Call; the receiver sees
// the same id, key and body, so it can deduplicate, and a new timestamp
// (the send time) with a signature over it.
func TestWebhookIdempotencyKeyStable(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	spec := hookSpec(srv.URL)
	spec.Idempotent = true
	hook, err := web.NewWebhook(spec, srv.allowing())
	require.NoError(t, err)
	require.True(t, hook.Idempotent())
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	hook = hook.WithClock(clk.now)

	call := hookCall("root.1/s1/step-3/0")
	for range 2 {
		_, err := hook.Execute(context.Background(), call)
		require.NoError(t, err)
		clk.advance(90 * time.Second)
	}
	reqs, bodies := srv.requests(), srv.bodies()
	require.Len(t, reqs, 2)
	for _, h := range []string{"webhook-id", "Idempotency-Key", "X-Revenant-Call-Id"} {
		require.NotEmpty(t, reqs[0].Header.Get(h), h)
		require.Equal(t, reqs[0].Header.Get(h), reqs[1].Header.Get(h), h)
	}
	require.Equal(t, "root.1/s1/step-3/0", reqs[1].Header.Get("webhook-id"))
	require.Equal(t, "root.1/s1/step-3/0", reqs[1].Header.Get("Idempotency-Key"))
	require.Equal(t, bodies[0], bodies[1])
	require.Equal(t, "1700000000", reqs[0].Header.Get("webhook-timestamp"))
	require.Equal(t, "1700000090", reqs[1].Header.Get("webhook-timestamp"), "stamped when sent")
	require.NotEqual(t, reqs[0].Header.Get("webhook-signature"), reqs[1].Header.Get("webhook-signature"))
	for i, r := range reqs {
		require.True(t, specVerifies(t, secret, r.Header, []byte(bodies[i])), "delivery %d", i)
	}
}

// TestWebhookStandardSecret: a "whsec_" secret signs with the key its
// base64 decodes to, so a Standard Webhooks library configured with the same
// secret verifies; a malformed one is refused without being quoted.
func TestWebhookStandardSecret(t *testing.T) {
	const std = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	spec := hookSpec(srv.URL)
	spec.Secret = web.NewSecret(std)
	hook, err := web.NewWebhook(spec, srv.allowing())
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), hookCall("k"))
	require.NoError(t, err)
	r, body := srv.requests()[0], []byte(srv.bodies()[0])
	require.True(t, specVerifies(t, std, r.Header, body))
	require.False(t, specVerifies(t, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", r.Header, body), "the base64 is decoded, not used as text")

	spec.Secret = web.NewSecret("whsec_not*base64!!")
	_, err = web.NewWebhook(spec, srv.allowing())
	require.EqualError(t, err, `webhook deploy: decode secret: it starts with "whsec_" but no standard base64 key follows`)
	spec.Secret = web.NewSecret("whsec_")
	_, err = web.NewWebhook(spec, srv.allowing())
	require.EqualError(t, err, `webhook deploy: decode secret: it starts with "whsec_" but no standard base64 key follows`)
	key, err := web.SigningKey("plain-secret-text")
	require.NoError(t, err)
	require.Equal(t, []byte("plain-secret-text"), key, "a secret without the prefix is its raw bytes")
}

// TestStandardWebhooksVector: the specification's published test vector.
func TestStandardWebhooksVector(t *testing.T) {
	key, err := web.SigningKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	const id, want = "msg_p5jXN8AQM9LWM0D4loKWxJek", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	at, body := time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)
	require.Equal(t, want, web.Sign(key, id, at, body))

	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,bm90LXRoaXMtb25l v2,abc "+want)
	require.NoError(t, web.Verify(key, h, body, at), "any of several signatures may match")
}

// TestWebhookNotIdempotent: a webhook not declared idempotent says so, which
// is what makes the runner settle it as an unknown outcome instead of
// calling it again (the runner's test covers that part).
func TestWebhookNotIdempotent(t *testing.T) {
	hook, err := web.NewWebhook(hookSpec("https://hooks.example.com/deploy"), dialing())
	require.NoError(t, err)
	require.False(t, hook.Idempotent())
}

func TestWebhookContract(t *testing.T) {
	spec := hookSpec("https://hooks.example.com/deploy")
	spec.Timeout = 5 * time.Second
	hook, err := web.NewWebhook(spec, dialing())
	require.NoError(t, err)
	s := hook.Spec()
	require.Equal(t, "deploy", s.Name)
	require.Equal(t, "Deploy a service.", s.Description)
	require.JSONEq(t, string(spec.Parameters), string(s.Schema))
	require.Equal(t, 6*time.Second, hook.Limits().Timeout)
	require.Equal(t, "ask", hook.Permission())
	res, err := hook.Resources(nil)
	require.NoError(t, err)
	require.Equal(t, []string{"tool:deploy"}, res)

	spec.Parameters = nil
	hook, err = web.NewWebhook(spec, dialing())
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object"}`, string(hook.Spec().Schema))

	for _, bad := range []struct {
		edit func(*web.WebhookSpec)
		want string
	}{
		{func(s *web.WebhookSpec) { s.Name = "" }, "webhook: no name"},
		{func(s *web.WebhookSpec) { s.URL = "hooks.example.com/x" }, "webhook deploy: url is not an absolute http or https URL"},
		{func(s *web.WebhookSpec) { s.Secret = web.Secret{} }, "webhook deploy: no secret"},
		{func(s *web.WebhookSpec) { s.Timeout = -time.Second }, "webhook deploy: negative timeout"},
		{func(s *web.WebhookSpec) { s.URL = "ftp://hooks.example.com/x" }, `webhook deploy: egress denied: scheme "ftp" is not http or https`},
	} {
		s := hookSpec("https://hooks.example.com/deploy")
		bad.edit(&s)
		_, err := web.NewWebhook(s, dialing())
		require.EqualError(t, err, bad.want)
	}
}

// TestWebhookEgress: the webhook URL is the operator's trusted destination
// for that webhook only; the policy's other rules and http_request are not
// widened by it.
func TestWebhookEgress(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

	// The configured URL is the operator's, not the model's: the webhook's
	// own client reaches it even on a loopback or private address and an
	// unlisted port, with no policy allowance...
	hook, err := web.NewWebhook(hookSpec(srv.URL+"/hook"), dialing())
	require.NoError(t, err)
	out, err := hook.Execute(context.Background(), hookCall("k"))
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	// ...and that trust does not leak: http_request under the same policy
	// is still refused the same address.
	_, err = web.NewHTTPRequest(dialing()).Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/hook"}))
	require.ErrorIs(t, err, web.ErrDenied)

	// A configured host name is trusted as a name: it is dialed as
	// configured, whatever it resolves to.
	res := fakeResolver{"hooks.internal.test": addrs("10.0.0.5")}
	_, err = web.NewWebhook(hookSpec("http://hooks.internal.test/hook"), dialing().WithResolver(res))
	require.NoError(t, err)

	// Redirects are not followed: the signed body goes to the configured URL
	// or nowhere.
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	redirect := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	hook, err = web.NewWebhook(hookSpec(redirect.URL), redirect.allowing().WithPorts(redirect.port, target.port))
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), hookCall("k"))
	require.EqualError(t, err, "webhook deploy: 307 Temporary Redirect")
	require.Empty(t, target.requests())
}

func TestWebhookFailures(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			http.Error(w, "boom:\n  the database is down", http.StatusInternalServerError)
		case "/long":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, strings.Repeat("x", 300))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("y", 5000))
		case "/slow":
			<-r.Context().Done()
		}
	})
	run := func(path string, edit func(*web.WebhookSpec)) (string, error) {
		spec := hookSpec(srv.URL + path)
		if edit != nil {
			edit(&spec)
		}
		hook, err := web.NewWebhook(spec, srv.allowing().WithMaxResponseBytes(250))
		require.NoError(t, err)
		return hook.Execute(context.Background(), hookCall("k"))
	}
	_, err := run("/500", nil)
	require.EqualError(t, err, "webhook deploy: 500 Internal Server Error: boom: the database is down")
	_, err = run("/long", nil)
	require.EqualError(t, err, "webhook deploy: 400 Bad Request: "+strings.Repeat("x", 200)+"…", "the excerpt is short")
	out, err := run("/empty", nil)
	require.NoError(t, err)
	require.Equal(t, "The webhook answered 204 No Content with an empty body.", out)
	out, err = run("/big", nil)
	require.NoError(t, err)
	require.Equal(t, "[response truncated: the body is larger than 250 bytes; the first 250 are shown]\n"+strings.Repeat("y", 250), out)

	_, err = run("/slow", func(s *web.WebhookSpec) { s.Timeout = 50 * time.Millisecond })
	require.ErrorIs(t, err, web.ErrTimeout)
	require.EqualError(t, err, "webhook deploy: request timed out after 50ms")

	hook, err := web.NewWebhook(hookSpec(srv.URL+"/500"), srv.allowing())
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{"a":`)})
	require.EqualError(t, err, "webhook deploy: the arguments are not valid JSON")
	_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{}`)})
	require.EqualError(t, err, "webhook deploy: the call has no idempotency key to send as webhook-id")
	require.Len(t, srv.requests(), 5, "neither was sent")
}

func TestVerifyRefusals(t *testing.T) {
	key, body, at := []byte("0123456789abcdef"), []byte(`{"x":1}`), time.Unix(1_700_000_000, 0)
	good := http.Header{}
	good.Set("webhook-id", "k1")
	good.Set("webhook-timestamp", "1700000000")
	good.Set("webhook-signature", web.Sign(key, "k1", at, body))
	require.NoError(t, web.Verify(key, good, body, at))

	for name, edit := range map[string]func(http.Header){
		"no id":            func(h http.Header) { h.Del("webhook-id") },
		"no timestamp":     func(h http.Header) { h.Del("webhook-timestamp") },
		"no signature":     func(h http.Header) { h.Del("webhook-signature") },
		"timestamp words":  func(h http.Header) { h.Set("webhook-timestamp", "soon") },
		"timestamp millis": func(h http.Header) { h.Set("webhook-timestamp", "1700000000000") },
		"no version":       func(h http.Header) { h.Set("webhook-signature", strings.TrimPrefix(h.Get("webhook-signature"), "v1,")) },
		"other version": func(h http.Header) {
			h.Set("webhook-signature", "v1a"+strings.TrimPrefix(h.Get("webhook-signature"), "v1"))
		},
		"truncated":  func(h http.Header) { h.Set("webhook-signature", h.Get("webhook-signature")[:20]) },
		"not base64": func(h http.Header) { h.Set("webhook-signature", "v1,!!!") },
	} {
		h := good.Clone()
		edit(h)
		require.ErrorIs(t, web.Verify(key, h, body, at), web.ErrUnverified, name)
	}
	require.ErrorIs(t, web.Verify([]byte("0123456789abcdeF"), good, body, at), web.ErrUnverified)
	require.ErrorIs(t, web.Verify(key, good, []byte(`{"x":2}`), at), web.ErrUnverified)
}

// TestSecretsNeverPrint: a secret shows as [redacted] through fmt (every
// verb, nested in structs and slices), JSON and slog, and a Webhook prints
// as its name and URL.
func TestSecretsNeverPrint(t *testing.T) {
	spec := hookSpec("https://hooks.example.com/deploy")
	hook, err := web.NewWebhook(spec, dialing())
	require.NoError(t, err)
	nested := struct {
		Specs []web.WebhookSpec
		Ptr   *web.WebhookSpec
		Hook  *web.Webhook
	}{[]web.WebhookSpec{spec}, &spec, hook}

	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		outs = append(outs, fmt.Sprintf(verb, spec), fmt.Sprintf(verb, nested), fmt.Sprintf(verb, hook), fmt.Sprintf(verb, spec.Secret))
	}
	outs = append(outs, fmt.Sprint(spec), fmt.Sprintln(nested))
	j, err := json.Marshal(nested.Specs)
	require.NoError(t, err)
	outs = append(outs, string(j))
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "spec", spec, "secret", spec.Secret)
	outs = append(outs, logged.String())

	for _, out := range outs {
		require.NotContains(t, out, secret)
		require.NotContains(t, out, fmt.Sprintf("%x", secret))
	}
	require.Contains(t, fmt.Sprintf("%+v", spec), "Secret:[redacted]")
	require.Equal(t, "webhook deploy → https://hooks.example.com/deploy", fmt.Sprintf("%v", hook))
	require.Contains(t, string(j), `"Secret":"[redacted]"`)

	// Decoding still reads the value.
	var s web.Secret
	require.NoError(t, json.Unmarshal([]byte(`"abc"`), &s))
	require.Equal(t, "abc", s.Reveal())
	require.Equal(t, 3, s.Len())
	require.Equal(t, "", web.Secret{}.Reveal())
}

// A webhook's URL names its host in ASCII (an internationalized name in
// its xn-- form), as config requires of webhook_tools: every transport
// dials such a name by its mapping (IDNA), which the policy's trusted
// destination, kept as written, would not match, so a private webhook
// would be refused at every call. A Go program building one is told at
// once.
func TestWebhookNonASCIIHostRefused(t *testing.T) {
	for _, u := range []string{"https://bücher.example/x", "http://ｓｖｃ.test:8080/x", "http://svc．test/x"} {
		_, err := web.NewWebhook(hookSpec(u), web.NewEgress())
		require.ErrorIs(t, err, web.ErrDenied, u)
		require.ErrorContains(t, err, "is not an ASCII name", u)
	}
	for _, u := range []string{"https://xn--bcher-kva.example/x", "http://[::1]:8080/x", "https://Hooks.Example_1.com/x"} {
		_, err := web.NewWebhook(hookSpec(u), web.NewEgress())
		require.NoError(t, err, u)
	}
}
