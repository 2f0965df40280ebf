package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
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

func TestWebhookSendsSignedRequest(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"deployed":true}`)
	})
	hook, err := web.NewWebhook(hookSpec(srv.URL+"/hooks/deploy"), srv.allowing())
	require.NoError(t, err)

	out, err := hook.Execute(context.Background(), hookCall("key-42"))
	require.NoError(t, err)
	require.Equal(t, `{"deployed":true}`, out)

	r, body := srv.requests()[0], srv.bodies()[0]
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/hooks/deploy", r.URL.Path)
	require.Equal(t, `{"service": "api", "n": 1}`, body, "the arguments are sent exactly as given")
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Equal(t, "key-42", r.Header.Get("Idempotency-Key"))
	require.Equal(t, "call-7", r.Header.Get("X-Revenant-Call-Id"))
	sig := r.Header.Get("X-Revenant-Signature")
	require.True(t, strings.HasPrefix(sig, "sha256="), sig)
	require.True(t, web.Verify([]byte(secret), []byte(body), sig), "the receiver can verify the signature")
	require.False(t, web.Verify([]byte("another-secret-of-length"), []byte(body), sig))
	require.False(t, web.Verify([]byte(secret), []byte(body+" "), sig))
}

// TestWebhookIdempotencyKeyStable: the runner re-executes an idempotent
// call found `executing` after a crash with the same Call; the receiver sees
// the same key, body and signature, so it can deduplicate.
func TestWebhookIdempotencyKeyStable(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	spec := hookSpec(srv.URL)
	spec.Idempotent = true
	hook, err := web.NewWebhook(spec, srv.allowing())
	require.NoError(t, err)
	require.True(t, hook.Idempotent())

	call := hookCall("root.1/s1/step-3/0")
	for range 2 {
		_, err := hook.Execute(context.Background(), call)
		require.NoError(t, err)
	}
	reqs, bodies := srv.requests(), srv.bodies()
	require.Len(t, reqs, 2)
	for _, h := range []string{"Idempotency-Key", "X-Revenant-Call-Id", "X-Revenant-Signature"} {
		require.NotEmpty(t, reqs[0].Header.Get(h), h)
		require.Equal(t, reqs[0].Header.Get(h), reqs[1].Header.Get(h), h)
	}
	require.Equal(t, "root.1/s1/step-3/0", reqs[1].Header.Get("Idempotency-Key"))
	require.Equal(t, bodies[0], bodies[1])
}

// TestWebhookNotIdempotent: a webhook not declared idempotent says so, which
// is what makes the runner settle it as an unknown outcome instead of
// calling it again (the runner's test covers that part).
func TestWebhookNotIdempotent(t *testing.T) {
	hook, err := web.NewWebhook(hookSpec("https://hooks.example.com/deploy"), web.NewEgress())
	require.NoError(t, err)
	require.False(t, hook.Idempotent())
}

func TestWebhookContract(t *testing.T) {
	spec := hookSpec("https://hooks.example.com/deploy")
	spec.Timeout = 5 * time.Second
	hook, err := web.NewWebhook(spec, web.NewEgress())
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
	hook, err = web.NewWebhook(spec, web.NewEgress())
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
		_, err := web.NewWebhook(s, web.NewEgress())
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
	hook, err := web.NewWebhook(hookSpec(srv.URL+"/hook"), web.NewEgress())
	require.NoError(t, err)
	out, err := hook.Execute(context.Background(), hookCall("k"))
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	// ...and that trust does not leak: http_request under the same policy
	// is still refused the same address.
	_, err = web.NewHTTPRequest(web.NewEgress()).Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/hook"}))
	require.ErrorIs(t, err, web.ErrDenied)

	// A configured host name is trusted as a name: it is dialed as
	// configured, whatever it resolves to.
	res := fakeResolver{"hooks.internal.test": addrs("10.0.0.5")}
	_, err = web.NewWebhook(hookSpec("http://hooks.internal.test/hook"), web.NewEgress().WithResolver(res))
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
	require.Equal(t, strings.Repeat("y", 250)+"\n[response truncated: the body is larger than 250 bytes; the first 250 are shown]", out)

	_, err = run("/slow", func(s *web.WebhookSpec) { s.Timeout = 50 * time.Millisecond })
	require.ErrorIs(t, err, web.ErrTimeout)
	require.EqualError(t, err, "webhook deploy: request timed out after 50ms")

	hook, err := web.NewWebhook(hookSpec(srv.URL+"/500"), srv.allowing())
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(`{"a":`)})
	require.EqualError(t, err, "webhook deploy: the arguments are not valid JSON")
}

func TestSignVerify(t *testing.T) {
	key, body := []byte("0123456789abcdef"), []byte(`{"x":1}`)
	sig := web.Sign(key, body)
	require.Equal(t, "sha256=", sig[:7])
	require.Len(t, sig, 7+64)
	require.True(t, web.Verify(key, body, sig))
	require.True(t, web.Verify(key, body, "sha256="+strings.ToUpper(sig[7:])), "hex case does not matter")
	for _, bad := range []string{"", sig[7:], "sha1=" + sig[7:], "sha256=zz", sig[:len(sig)-2], "sha256="} {
		require.False(t, web.Verify(key, body, bad), bad)
	}
	require.False(t, web.Verify([]byte("0123456789abcdeF"), body, sig))
	require.False(t, web.Verify(key, []byte(`{"x":2}`), sig))
}

// TestSecretsNeverPrint: a secret shows as [redacted] through fmt (every
// verb, nested in structs and slices), JSON and slog, and a Webhook prints
// as its name and URL.
func TestSecretsNeverPrint(t *testing.T) {
	spec := hookSpec("https://hooks.example.com/deploy")
	hook, err := web.NewWebhook(spec, web.NewEgress())
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
