package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/tools/web"
)

// routes answers a request by its URL (without query) from a table; an
// unknown URL is a 200 "end".
func routes(table map[string]func(*httpmsg.Request) (*httpmsg.Response, error)) func(*httpmsg.Request) (*httpmsg.Response, error) {
	return func(req *httpmsg.Request) (*httpmsg.Response, error) {
		u := *req.URL
		u.RawQuery = ""
		if f, ok := table[u.String()]; ok {
			return f(req)
		}
		return answer(200, nil, "end")(req)
	}
}

func redirectTo(status int, loc string) func(*httpmsg.Request) (*httpmsg.Response, error) {
	return answer(status, httpmsg.Header{"Location": {loc}}, "moved")
}

// TestRedirectHopLimit: MaxRedirects are followed; the next redirect is an
// error and its target is never sent.
func TestRedirectHopLimit(t *testing.T) {
	chain := func(n int) *fakeTransport {
		rt := &fakeTransport{}
		rt.respond = func(req *httpmsg.Request) (*httpmsg.Response, error) {
			k, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/"))
			if err != nil || k >= n {
				return answer(200, nil, "end of chain")(req)
			}
			return redirectTo(302, fmt.Sprintf("/%d", k+1))(req)
		}
		return rt
	}
	rt := chain(web.MaxRedirects)
	out, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/0"}))
	require.NoError(t, err)
	assert.Contains(t, out, "Final-URL: https://api.example.com/5\n")
	assert.Len(t, rt.urls(), web.MaxRedirects+1)

	rt = chain(web.MaxRedirects + 1)
	_, err = web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/0"}))
	require.EqualError(t, err, "GET https://api.example.com/0: redirected to https://api.example.com/6: too many redirects (more than 5)")
	assert.Len(t, rt.urls(), web.MaxRedirects+1, "the sixth redirect's target is not sent")
	assert.NotContains(t, rt.urls(), "https://api.example.com/6")
}

// TestRedirectEachHopChecked: a refused target deep in a chain is refused
// there, before it is sent; the hops before it were sent.
func TestRedirectEachHopChecked(t *testing.T) {
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/", "http://localhost/", "https://api.example.com:8443/",
		"https://evil.example.org/", "http://[::1]/", "file:///etc/passwd",
	} {
		rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
			"https://api.example.com/a": redirectTo(301, "https://cdn.example.com/b"),
			"https://cdn.example.com/b": redirectTo(307, target),
		})}
		policy := fetchPolicy(rt).WithHosts("*.example.com", "localhost", "169.254.169.254", "::1")
		_, err := web.NewHTTPRequest(policy).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/a"}))
		require.ErrorIs(t, err, web.ErrDenied, target)
		assert.Contains(t, err.Error(), "redirected to ", target)
		assert.Equal(t, []string{"https://api.example.com/a", "https://cdn.example.com/b"}, rt.urls(), target)
	}
}

// TestRedirectMethodAndBody: 301, 302 and 303 turn a POST into a GET
// without body or body headers (Content-Type, -Encoding, -Language,
// -Location); 307 and 308 send the same method, body and body headers
// again; HEAD stays HEAD; once a hop dropped the body it stays dropped,
// with its headers.
func TestRedirectMethodAndBody(t *testing.T) {
	for _, tc := range []struct {
		status           int
		method           string
		wantMethod       string
		wantBody, wantCT string
	}{
		{303, "POST", "GET", "", ""},
		{302, "POST", "GET", "", ""},
		{301, "PUT", "GET", "", ""},
		{303, "DELETE", "GET", "", ""},
		{301, "HEAD", "HEAD", "", ""},
		{307, "POST", "POST", `{"a":1}`, "application/json"},
		{308, "PATCH", "PATCH", `{"a":1}`, "application/json"},
	} {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.method), func(t *testing.T) {
			rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
				"https://api.example.com/a": redirectTo(tc.status, "/b"),
			})}
			bodyHeaders := map[string]string{"Content-Type": "application/json", "Content-Encoding": "identity", "Content-Language": "en", "Content-Location": "/doc"}
			headers := map[string]string{"X-Trace": "t"}
			for k, v := range bodyHeaders {
				headers[k] = v
			}
			args := map[string]any{"method": tc.method, "url": "https://api.example.com/a", "headers": headers}
			if tc.method != "HEAD" {
				args["body"] = `{"a":1}`
			}
			_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, args))
			require.NoError(t, err)
			require.Equal(t, []string{"https://api.example.com/a", "https://api.example.com/b"}, rt.urls())
			hop := rt.reqs[1]
			assert.Equal(t, tc.wantMethod, hop.Method)
			assert.Equal(t, tc.wantBody, rt.bodies[1])
			assert.Equal(t, int64(len(tc.wantBody)), hop.ContentLength)
			for k, v := range bodyHeaders {
				if tc.wantCT == "" { // the body was dropped, and its headers with it
					v = ""
				}
				assert.Equal(t, v, hop.Header.Get(k), k)
			}
			assert.Equal(t, "t", hop.Header.Get("X-Trace"), "other headers go on")
			assert.Equal(t, "key-1", hop.Header.Get("Idempotency-Key"))
		})
	}

	// 307 with an empty body: the method and the body's headers go on, as
	// net/http's client sends them.
	rt0 := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a": redirectTo(307, "/b"),
	})}
	_, err0 := web.NewHTTPRequest(fetchPolicy(rt0)).Execute(context.Background(), fetchCall(t, map[string]any{
		"method": "POST", "url": "https://api.example.com/a", "headers": map[string]string{"Content-Type": "text/plain"}, "body": ""}))
	require.NoError(t, err0)
	require.Len(t, rt0.reqs, 2)
	assert.Equal(t, "POST", rt0.reqs[1].Method)
	assert.Equal(t, "text/plain", rt0.reqs[1].Header.Get("Content-Type"))
	assert.Equal(t, "", rt0.bodies[1])

	// 303 then 307: the body dropped at the first hop is not sent again.
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a": redirectTo(303, "/b"),
		"https://api.example.com/b": redirectTo(307, "/c"),
	})}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{
		"method": "POST", "url": "https://api.example.com/a", "body": "x", "headers": map[string]string{"Content-Type": "text/plain"}}))
	require.NoError(t, err)
	require.Len(t, rt.reqs, 3)
	assert.Equal(t, "GET", rt.reqs[2].Method)
	assert.Equal(t, "", rt.bodies[2])
	assert.Empty(t, rt.reqs[2].Header.Values("Content-Type"), "the body's headers stay dropped with it")
}

// TestRedirectCredentialsStayOnSite: Authorization, Cookie and the other
// credentials go on to the same host and its subdomains, never to another
// host, nor to any hop after one went elsewhere, even back home.
func TestRedirectCredentialsStayOnSite(t *testing.T) {
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://example.com/a":          redirectTo(302, "https://EXAMPLE.com:443/b"),
		"https://EXAMPLE.com:443/b":      redirectTo(307, "https://api.example.com/c"),
		"https://api.example.com/c":      redirectTo(308, "https://notexample.com/d"),
		"https://notexample.com/d":       redirectTo(302, "https://example.com/e"),
		"https://example.com/e":          answer(200, nil, "home"),
		"https://unrelated.example.org/": answer(200, nil, "never"),
	})}
	creds := map[string]string{"Authorization": "Bearer s3cr3t", "Cookie": "session=s3cr3t", "Cookie2": "$Version=1", "Proxy-Authorization": "Basic s3cr3t",
		"Www-Authenticate": "Basic realm=s3cr3t", "Proxy-Authenticate": "Basic realm=s3cr3t", "X-Keep": "k"}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://example.com/a", "headers": creds}))
	require.NoError(t, err)
	require.Equal(t, []string{"https://example.com/a", "https://EXAMPLE.com:443/b", "https://api.example.com/c", "https://notexample.com/d", "https://example.com/e"}, rt.urls())
	for i, wantCreds := range []bool{true, true, true, false, false} {
		h := rt.reqs[i].Header
		for _, k := range []string{"Authorization", "Cookie", "Cookie2", "Proxy-Authorization", "Www-Authenticate", "Proxy-Authenticate"} {
			if wantCreds {
				assert.Equal(t, creds[k], h.Get(k), "hop %d %s", i, k)
			} else {
				assert.Empty(t, h.Values(k), "hop %d (%s) must not get %s", i, rt.reqs[i].URL, k)
			}
		}
		assert.Equal(t, "k", h.Get("X-Keep"), "hop %d", i)
		assert.Equal(t, "key-1", h.Get("Idempotency-Key"), "hop %d", i)
	}
	for _, b := range rt.bodies {
		assert.NotContains(t, b, "s3cr3t")
	}

	// The site is the first URL's: a hop from a subdomain back up to the
	// first host keeps them (it is the same site as the first request).
	rt = &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a":    redirectTo(302, "https://eu.api.example.com/b"),
		"https://eu.api.example.com/b": redirectTo(302, "https://api.example.com/c"),
		"https://api.example.com/c":    answer(200, nil, "ok"),
	})}
	_, err = web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/a", "headers": creds}))
	require.NoError(t, err)
	require.Len(t, rt.reqs, 3)
	assert.Equal(t, creds["Authorization"], rt.reqs[2].Header.Get("Authorization"), "back on the first host")
}

// TestRedirectReferer: a hop names where it came from, as browsers'
// default policy does: the previous URL (without user info and fragment)
// to the same origin, only its origin to another (another host, or the
// same host on another port), nothing from https to http; a 3xx without
// Location is the answer.
func TestRedirectReferer(t *testing.T) {
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://user:pw@api.example.com/a#frag": redirectTo(302, "https://API.example.com:443/b?token=s3cr3t"),
		"https://API.example.com:443/b":          redirectTo(302, "https://other.example.net/c?k=v"),
		"https://other.example.net/c":            redirectTo(302, "https://other.example.net:80/d"),
		"https://other.example.net:80/d":         redirectTo(302, "http://api.example.com/e"),
		"http://api.example.com/e":               answer(302, nil, "no location"),
	})}
	out, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://user:pw@api.example.com/a?q=1#frag"}))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "HTTP 302 Found\nFinal-URL: http://api.example.com/e\n"), out)
	require.Len(t, rt.reqs, 5)
	assert.Empty(t, rt.reqs[0].Header.Values("Referer"), "the first request has none of its own")
	assert.Equal(t, "https://api.example.com/a?q=1", rt.reqs[1].Header.Get("Referer"), "same origin: the whole URL")
	assert.Equal(t, "https://API.example.com:443/", rt.reqs[2].Header.Get("Referer"), "another host: the origin alone, not the query's secret")
	assert.Equal(t, "https://other.example.net/", rt.reqs[3].Header.Get("Referer"), "another port: the origin alone")
	assert.Empty(t, rt.reqs[4].Header.Values("Referer"), "none from https to http")

	// Another scheme is another origin, even on the same host and port.
	rt = &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"http://api.example.com:443/a": redirectTo(302, "https://api.example.com/b"),
	})}
	_, err = web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "http://api.example.com:443/a?token=s3cr3t"}))
	require.NoError(t, err)
	require.Len(t, rt.reqs, 2)
	assert.Equal(t, "http://api.example.com:443/", rt.reqs[1].Header.Get("Referer"), "http to https: the origin alone")

	// A Referer the request set itself goes on unchanged.
	rt = &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a": redirectTo(302, "https://other.example.net/b"),
	})}
	_, err = web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{
		"url": "https://api.example.com/a?q=1", "headers": map[string]any{"Referer": "https://mine.example/"},
	}))
	require.NoError(t, err)
	require.Len(t, rt.reqs, 2)
	assert.Equal(t, "https://mine.example/", rt.reqs[1].Header.Get("Referer"))
}

// TestRedirectPermitted: a hop to another host is put to the call's Permit
// (the session's permission rules) with its resource; a refused one is an
// error naming the host and the rule, and never sent. Hops back to the
// call's own host, decided before it ran, are not asked about; without a
// Permit, nothing is.
func TestRedirectPermitted(t *testing.T) {
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://a.example.com/go":     redirectTo(302, "https://A.example.com./again"),
		"https://A.example.com./again": redirectTo(307, "https://b.example.com/there"),
		"https://b.example.com/there":  redirectTo(302, "https://c.example.com/end"),
	})}
	var asked []string
	call := fetchCall(t, map[string]any{"url": "https://a.example.com/go"})
	call.Permit = func(res ...string) error {
		asked = append(asked, res...)
		if res[0] == "http:c.example.com" {
			return fmt.Errorf(`%s is declined by a permission rule (config "*": deny)`, res[0])
		}
		return nil
	}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), call)
	require.ErrorIs(t, err, web.ErrNotPermitted)
	assert.Equal(t, `GET https://a.example.com/go: redirected to https://c.example.com/end: redirect not permitted: http:c.example.com is declined by a permission rule (config "*": deny)`, err.Error())
	assert.Equal(t, []string{"http:b.example.com", "http:c.example.com"}, asked, "the call's own host is not asked about")
	assert.Equal(t, []string{"https://a.example.com/go", "https://A.example.com./again", "https://b.example.com/there"}, rt.urls(), "the refused hop is never sent")

	rt.reqs = nil
	call.Permit = nil
	out, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), call)
	require.NoError(t, err)
	assert.Contains(t, out, "Final-URL: https://c.example.com/end")
}

// A hop to a subdomain of the call's host is another host: the session's
// rules decide it (a rule may allow example.com and deny
// internal.example.com). Sending credentials on to a subdomain is a
// different question (sameSite), and does not stand in for a permission.
func TestRedirectToSubdomainIsPermitted(t *testing.T) {
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://example.com/go":             redirectTo(302, "https://internal.example.com/admin"),
		"https://internal.example.com/admin": answer(200, nil, "secret"),
	})}
	var asked []string
	call := fetchCall(t, map[string]any{"url": "https://example.com/go"})
	call.Permit = func(res ...string) error {
		asked = append(asked, res...)
		return fmt.Errorf(`%s is declined by a permission rule (session %q: deny)`, res[0], res[0])
	}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), call)
	require.ErrorIs(t, err, web.ErrNotPermitted)
	assert.Equal(t, []string{"http:internal.example.com"}, asked)
	assert.Equal(t, []string{"https://example.com/go"}, rt.urls(), "the refused hop is never sent")
}

// TestRedirectRefusedBeforeAsking: a hop the egress policy refuses is
// refused as such, before the session's permission rules are asked about
// it: a rule must not be consulted (or a person's attention spent) on a
// place the call could never reach.
func TestRedirectRefusedBeforeAsking(t *testing.T) {
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://a.example.com/go": redirectTo(302, "http://169.254.169.254/latest/meta-data/"),
	})}
	var asked []string
	call := fetchCall(t, map[string]any{"url": "https://a.example.com/go"})
	call.Permit = func(res ...string) error {
		asked = append(asked, res...)
		return fmt.Errorf("%s needs approval", res[0])
	}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), call)
	require.ErrorIs(t, err, web.ErrDenied)
	require.NotErrorIs(t, err, web.ErrNotPermitted)
	assert.Empty(t, asked)
	assert.Equal(t, []string{"https://a.example.com/go"}, rt.urls())
}

// TestRedirectAnswersClosed: the body of every redirect answer is closed
// when its hop is followed (its connection goes back to the pool), and so
// is the final answer's once the tool has read it.
func TestRedirectAnswersClosed(t *testing.T) {
	var mu sync.Mutex
	var bodies []*closeTracker
	withBody := func(status int, loc string) func(*httpmsg.Request) (*httpmsg.Response, error) {
		return func(req *httpmsg.Request) (*httpmsg.Response, error) {
			b := &closeTracker{Reader: strings.NewReader("moved")}
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
			h := httpmsg.Header{}
			if loc != "" {
				h.Set("Location", loc)
			}
			return &httpmsg.Response{StatusCode: status, Header: h, Body: b, Request: req}, nil
		}
	}
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a": withBody(301, "/b"),
		"https://api.example.com/b": withBody(307, "https://cdn.example.com/c"),
		"https://cdn.example.com/c": withBody(200, ""),
	})}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/a"}))
	require.NoError(t, err)
	require.Len(t, bodies, 3)
	for i, b := range bodies {
		assert.True(t, b.closed(), "answer %d's body is closed", i)
	}
}

// TestRedirectHopEndsWithTheCall: a hop is sent under the call's context,
// so when the runner ends the call (a cancelled step) while a redirect's
// target holds the request, the hop ends too, at once.
func TestRedirectHopEndsWithTheCall(t *testing.T) {
	arrived := make(chan struct{})
	rt := &fakeTransport{respond: routes(map[string]func(*httpmsg.Request) (*httpmsg.Response, error){
		"https://api.example.com/a": redirectTo(302, "/slow"),
		"https://api.example.com/slow": func(req *httpmsg.Request) (*httpmsg.Response, error) {
			close(arrived)
			<-req.Context().Done() // a transport honours the request's context
			return nil, req.Context().Err()
		},
	})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-arrived:
			cancel()
		case <-ctx.Done(): // the test ended first
		}
	}()
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(ctx, fetchCall(t, map[string]any{"url": "https://api.example.com/a"}))
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "redirected to https://api.example.com/slow")
}
