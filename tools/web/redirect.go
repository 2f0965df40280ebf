package web

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/tools/web/httpargs"
)

// An httpmsg.Doer does one round trip, so the http_request tool follows
// redirects itself, here, with the rules net/http's client applies, so
// that what a server sees is what it saw when the tool was built on
// net/http:
//
//   - 301, 302, 303, 307 and 308 with a Location are followed; any other
//     answer, and a 3xx without Location, is the final answer.
//   - 301, 302 and 303 drop the body and its headers (Content-Type,
//     Content-Encoding, Content-Language, Content-Location) and turn any
//     method but GET and HEAD into GET; 307 and 308 keep the method and
//     send the same body again. Once a hop dropped the body it stays
//     dropped.
//   - Each hop carries the first request's headers, except that
//     Authorization, Cookie, Cookie2, WWW-Authenticate, Proxy-Authorization
//     and Proxy-Authenticate are dropped from the first hop to a host that
//     is neither the first request's host nor a subdomain of it, and from
//     every hop after that.
//   - A Referer names where the hop came from, as browsers' default
//     policy (strict-origin-when-cross-origin) has it, not as net/http
//     does: the previous URL, without user info and fragment, to the same
//     origin; only its origin (scheme, host and port) to another, so a
//     query that carried a secret never reaches a server it redirected
//     to; none from https to http. A Referer the request set itself goes
//     on unchanged, as any other header it set.
//   - At most MaxRedirects are followed; the next one is an error.
//   - Every hop's URL is checked with the policy's CheckURL before it is
//     sent (and the client checks it again, and its address when it
//     dials): a redirect to a refused place is an error, never a request.
//   - A hop to another host is also put to the session's permission rules
//     (tool.Call.Permit, with the hop's httpargs.Resource): the call's own
//     host was decided before it ran, the hop's was not. A hop the rules
//     deny, or would ask a person about (a running call cannot stop to
//     ask), is an error naming the host and the rule, never a request.

// hop is where a redirect leads: the next request's method and URL, and
// whether it carries the body again.
type hop struct {
	method   string
	url      *url.URL
	withBody bool
}

// follow sends first through c, then follows the redirects of the answers
// as the rules above say. It returns the final answer and its URL, and the
// last redirect target it followed or refused (nil: none), for messages.
// body is first's body, kept to send again on 307 and 308; permit is the
// call's tool.Call.Permit (nil: no rules to ask).
func follow(policy Egress, c httpmsg.Doer, first *httpmsg.Request, body string, permit func(...string) error) (resp *httpmsg.Response, final, redirected *url.URL, err error) {
	ctx := first.Context()
	initial := first.Header.Clone()
	cur := first
	// keepBody: no hop so far dropped the body (301, 302 and 303 do), so
	// the body, if any, and its headers go on; an empty body's headers too,
	// as net/http's client sends them on 307 and 308.
	keepBody := true
	strip := false
	for n := 0; ; n++ {
		resp, err = c.Do(cur)
		if err != nil {
			return nil, nil, redirected, err
		}
		next, ok, err := nextHop(resp, cur)
		if err != nil {
			drainClose(resp.Body)
			return nil, nil, redirected, err
		}
		if !ok {
			return resp, cur.URL, redirected, nil
		}
		drainClose(resp.Body)
		redirected = next.url
		if n+1 > MaxRedirects {
			return nil, nil, redirected, fmt.Errorf("too many redirects (more than %d)", MaxRedirects)
		}
		if err := policy.CheckURL(next.url); err != nil {
			return nil, nil, redirected, err
		}
		if err := permitHop(permit, first.URL, next.url); err != nil {
			return nil, nil, redirected, err
		}
		keepBody = keepBody && next.withBody
		if !strip && !sameSite(first.URL, next.url) {
			strip = true
		}
		var rd io.Reader
		if keepBody && body != "" {
			rd = strings.NewReader(body)
		}
		req, err := httpmsg.NewRequest(ctx, next.method, next.url.String(), rd)
		if err != nil {
			return nil, nil, redirected, err
		}
		req.Header = hopHeader(initial, strip, !keepBody)
		if ref := referer(cur.URL, next.url, req.Header.Get("Referer")); ref != "" {
			req.Header.Set("Referer", ref)
		}
		cur = req
	}
}

// permitHop asks permit about a hop to next, unless it goes to the first
// request's host, which the rules decided before the call ran (an approval
// of the call covers it).
func permitHop(permit func(...string) error, first, next *url.URL) error {
	res := httpargs.Resource(next)
	if permit == nil || res == httpargs.Resource(first) {
		return nil
	}
	if err := permit(res); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPermitted, err)
	}
	return nil
}

// nextHop is where resp, the answer to req, redirects: ok false when it is
// not a redirect to follow; an error when its Location cannot be read.
func nextHop(resp *httpmsg.Response, req *httpmsg.Request) (hop, bool, error) {
	next := hop{method: req.Method}
	switch resp.StatusCode {
	case httpmsg.StatusMovedPermanently, httpmsg.StatusFound, httpmsg.StatusSeeOther:
		if next.method != httpmsg.MethodGet && next.method != httpmsg.MethodHead {
			next.method = httpmsg.MethodGet
		}
	case httpmsg.StatusTemporaryRedirect, httpmsg.StatusPermanentRedirect:
		next.withBody = true
	default:
		return hop{}, false, nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return hop{}, false, nil // a 3xx without Location is an answer
	}
	u, err := req.URL.Parse(loc)
	if err != nil {
		return hop{}, false, fmt.Errorf("failed to parse Location header %q: %v", loc, err)
	}
	next.url = u
	return next, true, nil
}

// sensitiveHeaders are not sent on to another site.
var sensitiveHeaders = []string{"Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization", "Proxy-Authenticate"}

// bodyHeaders describe a body, and go when a redirect drops it.
var bodyHeaders = []string{"Content-Encoding", "Content-Language", "Content-Location", "Content-Type"}

// hopHeader is the header of a redirect hop: the first request's, without
// the sensitive ones (strip) and those of a dropped body (noBody).
func hopHeader(initial httpmsg.Header, strip, noBody bool) httpmsg.Header {
	h := initial.Clone()
	if h == nil {
		h = httpmsg.Header{}
	}
	if strip {
		for _, k := range sensitiveHeaders {
			h.Del(k)
		}
	}
	if noBody {
		for _, k := range bodyHeaders {
			h.Del(k)
		}
	}
	return h
}

// sameSite reports whether credentials of a request to first may go to
// next: the same host or a subdomain of it (ports aside), as net/http
// decides. Names compare without case and trailing dot; anything that is
// not a plain name (an IPv6 literal, a zone) must match exactly.
func sameSite(first, next *url.URL) bool {
	parent, sub := httpargs.NormalizeHost(first.Hostname()), httpargs.NormalizeHost(next.Hostname())
	if sub == parent {
		return true
	}
	if strings.ContainsAny(sub, ":%") || parent == "" {
		return false
	}
	return strings.HasSuffix(sub, "."+parent)
}

// referer is the Referer of a hop from prev to next: the request's own
// (explicit); else prev without user info and fragment when next is of
// the same origin, prev's origin alone when it is not; none from https to
// http.
func referer(prev, next *url.URL, explicit string) string {
	if prev.Scheme == "https" && next.Scheme == "http" {
		return ""
	}
	if explicit != "" {
		return explicit
	}
	r := *prev
	r.User, r.Fragment, r.RawFragment = nil, "", ""
	if !sameOrigin(prev, next) {
		r.Path, r.RawPath, r.RawQuery, r.ForceQuery = "/", "", "", false
	}
	return r.String()
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (a default port counts as given): an origin, as browsers compare them.
// url.Parse lowercases schemes; a port urlPort cannot read is no match.
func sameOrigin(a, b *url.URL) bool {
	pa, errA := urlPort(a, a.Scheme)
	pb, errB := urlPort(b, b.Scheme)
	return a.Scheme == b.Scheme && errA == nil && errB == nil && pa == pb &&
		httpargs.NormalizeHost(a.Hostname()) == httpargs.NormalizeHost(b.Hostname())
}

// drainClose closes a body we will not use, reading a little first so a
// small answer's connection can be reused.
func drainClose(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, 2<<10)
	_ = b.Close()
}
