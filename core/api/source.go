package api

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// A browser is a confused deputy: any web page can make it send requests
// to a server on this machine. Two checks, before routing, keep pages away:
//
//   - Origin. A browser names the page's origin on every cross-origin
//     request and on every same-origin POST. A request that carries an
//     Origin not allowed (none are by default) is refused, with tokens or
//     without: a "simple" cross-site POST (Content-Type: text/plain) would
//     otherwise create sessions and admit prompts, which call tools.
//   - Host (when the server has no tokens). DNS rebinding points a name the
//     page controls at 127.0.0.1; the browser then treats the server as the
//     page's own origin and sends GETs without Origin. The request still
//     names the page's host in Host, so a server without tokens answers
//     only requests addressed to a loopback name or address.
//
// Clients that are not browsers (curl, SDKs) send no Origin and address
// the server by the name they dialled, so neither check touches them.

// preflightMaxAge is how long (seconds) a browser may cache a preflight.
const preflightMaxAge = "600"

// exposedHeaders are the headers of an answer that docs/api.md tells
// clients to read and that are not CORS-safelisted: without them in
// Access-Control-Expose-Headers a browser page cannot see when to send a
// 429 or 503 again. Set on every answer to an allowed origin, an event
// stream's and an error's included, since a browser reads the header on
// the answer itself, not on the preflight.
const exposedHeaders = "Retry-After"

// CanonicalOrigin checks an allowed origin as an operator writes it
// (`https://console.example`, `http://localhost:3000`) and returns it the
// way browsers send it: lowercase, without a default port, without a
// trailing slash. Anything else (a path, a query, credentials, another
// scheme, "null") is an error.
func CanonicalOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("allowed origin %q: want scheme://host[:port], as a browser's Origin header names a page (https://console.example)", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if !originHost(host) {
		return "", fmt.Errorf("allowed origin %q: the host is not one a browser sends: no wildcards (list each origin), and an internationalized name in its xn-- form", s)
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" {
		return u.Scheme + "://" + host, nil
	}
	// A browser writes the port as a number (no leading zeros) and leaves
	// its scheme's default out; a port no URL can have would match no
	// Origin, silently.
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("allowed origin %q: the port must be 1–65535", s)
	}
	if (u.Scheme == "http" && n == 80) || (u.Scheme == "https" && n == 443) {
		return u.Scheme + "://" + host, nil
	}
	return u.Scheme + "://" + host + ":" + strconv.Itoa(n), nil
}

// originHost reports whether host (lowercase) is one a browser's Origin
// can name: an IP address, or a name of ASCII letters, digits, '-', '_'
// and '.'. Anything else ("*.example.com", a Unicode name, which browsers
// send in its xn-- form) would be compared with every Origin and match
// none, silently.
func originHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// ParseOrigins reads a comma-separated list of allowed origins
// (REVENANT_ALLOWED_ORIGINS); empty items are skipped.
func ParseOrigins(spec string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(spec, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		o, err := CanonicalOrigin(item)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// LoopbackHost reports whether a Host header names this machine's
// loopback: localhost (any case, one trailing dot allowed) or a loopback
// address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104), with or without a
// port, an IPv6 address in brackets. An empty Host (HTTP/1.0, which no
// browser sends) is allowed: only a Host naming something else is a sign
// of DNS rebinding.
func LoopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	name, ok := hostName(hostport)
	if !ok {
		return false
	}
	if strings.Contains(name, ":") {
		// An IPv6 address, in brackets or bare: taken as it is written
		// (no trailing dot), as net/url reads it.
		addr, err := netip.ParseAddr(name)
		return err == nil && addr.Is6() && addr.Zone() == "" && addr.Unmap().IsLoopback()
	}
	if strings.HasPrefix(hostport, "[") {
		// Brackets hold an IPv6 address only (RFC 3986's IP-literal):
		// "[127.0.0.1]" is no Host a client sends, and net/url refuses it.
		return false
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(name)
	return err == nil && addr.Zone() == "" && addr.Unmap().IsLoopback()
}

// hostName splits the port off a Host header: "name", "name:port",
// "[v6]", "[v6]:port"; a bare IPv6 address is taken whole.
func hostName(hostport string) (string, bool) {
	if rest, ok := strings.CutPrefix(hostport, "["); ok {
		name, port, ok := strings.Cut(rest, "]")
		if !ok {
			return "", false
		}
		if port != "" {
			p, ok := strings.CutPrefix(port, ":")
			return name, ok && validPort(p)
		}
		return name, true
	}
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.Contains(hostport[:i], ":") {
		return hostport, true
	}
	return hostport[:i], validPort(hostport[i+1:])
}

// validPort: digits only (empty allowed, as in a URL), at most 65535.
func validPort(p string) bool {
	if len(p) > 5 {
		return false
	}
	n := 0
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// checkSource applies the Host and Origin checks (see above). For an
// allowed origin it adds the CORS headers a browser needs to read the
// answer, and answers a preflight itself (done).
func (d *Directory) checkSource(w httpmsg.ResponseWriter, r *httpmsg.Request) (done bool, err error) {
	if d.cfg.loopbackOnly && !LoopbackHost(r.Host) {
		return false, fail(ErrForbiddenHost, "this server has no tokens, so it answers only requests addressed to a loopback name or address (localhost, 127.0.0.1, [::1]), not the Host this request names")
	}
	origin, sent := r.Header["Origin"]
	if !sent || len(origin) == 1 && origin[0] == "" {
		// An empty Origin is no browser's (an opaque origin is "null"),
		// and Cloudflare drops an empty header before the Worker sees
		// it: absent on every host.
		return false, nil
	}
	if len(origin) != 1 || !d.origins[strings.ToLower(origin[0])] {
		return false, fail(ErrForbiddenOrigin, "requests from a browser page are refused unless the server allows its origin, and it does not allow this one")
	}
	w.Header().Set("Access-Control-Allow-Origin", origin[0])
	w.Header().Set("Vary", "Origin")
	w.Header().Set("Access-Control-Expose-Headers", exposedHeaders)
	if r.Method == httpmsg.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID")
		w.Header().Set("Access-Control-Max-Age", preflightMaxAge)
		w.WriteHeader(httpmsg.StatusNoContent)
		return true, nil
	}
	return false, nil
}

// Admit applies the checks that come before routing: the Host and Origin
// checks of h's configuration, a query string that parses (else 400), then
// a clean path (an unclean one,
// //v1/sessions or /v1/sessions/x/.., is 404 with a message that says
// why, in JSON like every answer: net/http's ServeMux redirected it, and
// the router matches no route for it). False means it
// has answered (an error, or a CORS preflight) and the request must go no
// further. Every host's composition calls it first (Handler, Directory,
// host.GuestHandler), so all answer alike.
func (d *Directory) Admit(w httpmsg.ResponseWriter, r *httpmsg.Request) bool {
	done, err := d.checkSource(w, r)
	if err == nil && !done && !cleanPath(r.URL.Path) {
		err = fail(ErrNotFound, "no route "+core.Clip(r.URL.Path)+" (a path has no empty, . or .. segments)")
	}
	if err == nil && !done {
		// A parameter that does not decode would otherwise be dropped
		// unseen (url.Values keeps the pairs that parse): ?limit=%zz would
		// list with the default limit.
		q, qerr := url.ParseQuery(r.URL.RawQuery)
		if qerr != nil {
			err = fail(ErrInvalidRequest, "the query string does not parse: "+core.Clip(qerr.Error()))
		}
		// A parameter the API reads is read once (Query().Get, the first
		// value): ?limit=5&limit=abc would be served with its bad half
		// unseen, so one given twice is refused, as a JSON field is.
		for _, name := range queryParams {
			if err == nil && len(q[name]) > 1 {
				err = fail(ErrInvalidRequest, "query parameter "+name+" is given more than once; each may be given once")
			}
		}
	}
	if err != nil {
		WriteError(w, err)
		return false
	}
	return !done
}

// queryParams are the query parameters any route reads.
var queryParams = []string{"limit", "before", "after", "cursor"}

// cleanPath reports whether p is clean: what path.Clean leaves as it is,
// except a trailing slash (routed, and answered 404 as no route).
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return true // "*" of OPTIONS *, or a form no router cleans
	}
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" || trimmed == "/" {
		return true
	}
	// path.Clean changes a rooted path exactly when a segment is empty,
	// "." or ".." (a loop: the path package cost the guest 2 KB gzip).
	for rest := trimmed[1:]; ; {
		seg, after, more := strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		if !more {
			return true
		}
		rest = after
	}
}
