package route

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Mux is a routing table with a handler per route. Routes are registered
// before the first request (it is not safe to register concurrently with
// matching); the zero value is an empty table.
type Mux struct {
	routes []route
	// Fallback answers a request that no route takes (ServeHTTP); nil
	// answers a bare 404.
	Fallback httpmsg.Handler
}

type route struct {
	method  string
	pattern string   // as registered: "GET /v1/sessions/{id}"
	segs    []string // literal, or a wildcard's name in names
	names   []string // per segment: the wildcard's name, "" for a literal
	handler httpmsg.Handler
}

// Match is a route a request matched: its pattern as registered and its
// wildcards' values.
type Match struct {
	Pattern string
	Handler httpmsg.Handler
	names   []string
	values  []string
}

// SetPathValues sets r's path values ({id} …) from m (r.PathValue).
func (m Match) SetPathValues(r *httpmsg.Request) {
	for i, name := range m.names {
		if name != "" {
			r.SetPathValue(name, m.values[i])
		}
	}
}

// Value returns the value of the wildcard name, or "".
func (m Match) Value(name string) string {
	for i, n := range m.names {
		if n == name && name != "" {
			return m.values[i]
		}
	}
	return ""
}

// Handle registers h for pattern ("METHOD /path/{name}"). A malformed
// pattern, or one that conflicts with a registered one, panics: the
// tables are fixed in the code, as ServeMux's are.
func (m *Mux) Handle(pattern string, h httpmsg.Handler) {
	rt, err := parse(pattern)
	if err != nil {
		panic(fmt.Sprintf("route: %v", err))
	}
	for _, other := range m.routes {
		if other.method == rt.method && conflict(other, rt) {
			panic(fmt.Sprintf("route: pattern %q conflicts with %q: both match the same paths and neither is more specific", pattern, other.pattern))
		}
	}
	rt.handler = h
	m.routes = append(m.routes, rt)
}

// HandleFunc registers f for pattern (Handle); nil f registers a route
// with no handler, for a table that only names routes.
func (m *Mux) HandleFunc(pattern string, f func(httpmsg.ResponseWriter, *httpmsg.Request)) {
	var h httpmsg.Handler
	if f != nil {
		h = httpmsg.HandlerFunc(f)
	}
	m.Handle(pattern, h)
}

// parse reads "METHOD /seg/{name}…".
func parse(pattern string) (route, error) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || strings.ContainsAny(method, " /") {
		return route{}, fmt.Errorf("parse pattern %q: want METHOD /path", pattern)
	}
	if !strings.HasPrefix(path, "/") {
		return route{}, fmt.Errorf("parse pattern %q: the path must start with /", pattern)
	}
	rt := route{method: method, pattern: pattern}
	seen := map[string]bool{}
	for _, seg := range strings.Split(path[1:], "/") {
		name, wild := strings.CutPrefix(seg, "{")
		switch {
		case seg == "":
			return route{}, fmt.Errorf("parse pattern %q: empty segment", pattern)
		case wild:
			name, ok = strings.CutSuffix(name, "}")
			if !ok || name == "" || strings.ContainsAny(name, "{}") || seen[name] {
				return route{}, fmt.Errorf("parse pattern %q: bad or repeated wildcard %q", pattern, seg)
			}
			seen[name] = true
			rt.segs, rt.names = append(rt.segs, ""), append(rt.names, name)
		case strings.ContainsAny(seg, "{}"):
			return route{}, fmt.Errorf("parse pattern %q: a wildcard must be a whole segment: %q", pattern, seg)
		default:
			rt.segs, rt.names = append(rt.segs, seg), append(rt.names, "")
		}
	}
	return rt, nil
}

// conflict reports whether a and b match a common path with neither more
// specific than the other (equal patterns included).
func conflict(a, b route) bool {
	if len(a.segs) != len(b.segs) {
		return false
	}
	aSpecific, bSpecific := true, true // a ⊆ b, b ⊆ a
	for i := range a.segs {
		aWild, bWild := a.names[i] != "", b.names[i] != ""
		switch {
		case !aWild && !bWild && a.segs[i] != b.segs[i]:
			return false // disjoint
		case aWild && !bWild:
			aSpecific = false
		case bWild && !aWild:
			bSpecific = false
		}
	}
	return aSpecific == bSpecific
}

// Match returns the route of method and escapedPath (URL.EscapedPath),
// with its wildcards' values: a route of the method, else, for HEAD, a GET
// route.
func (m *Mux) Match(method, escapedPath string) (Match, bool) {
	if !strings.HasPrefix(escapedPath, "/") {
		return Match{}, false
	}
	segs := strings.Split(escapedPath[1:], "/")
	for i, s := range segs {
		if s == "." || s == ".." {
			return Match{}, false // not clean: ServeMux would redirect
		}
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	if rt := m.best(method, segs); rt != nil {
		return Match{Pattern: rt.pattern, Handler: rt.handler, names: rt.names, values: segs}, true
	}
	if method == httpmsg.MethodHead {
		if rt := m.best(httpmsg.MethodGet, segs); rt != nil {
			return Match{Pattern: rt.pattern, Handler: rt.handler, names: rt.names, values: segs}, true
		}
	}
	return Match{}, false
}

// best returns the most specific route of method matching segs (nil if
// none): conflict-free registration makes it unique.
func (m *Mux) best(method string, segs []string) *route {
	var best *route
	for i := range m.routes {
		rt := &m.routes[i]
		if rt.method == method && rt.matches(segs) && (best == nil || moreSpecific(rt, best)) {
			best = rt
		}
	}
	return best
}

func (rt *route) matches(segs []string) bool {
	if len(segs) != len(rt.segs) {
		return false
	}
	for i, s := range segs {
		if rt.names[i] != "" {
			// ServeMux takes a segment that unescapes to "/" for a
			// trailing slash, which no wildcard matches.
			if s == "" || s == "/" {
				return false
			}
		} else if s != rt.segs[i] {
			return false
		}
	}
	return true
}

// moreSpecific: a has a literal where b first has a wildcard and a does not.
func moreSpecific(a, b *route) bool {
	for i := range a.names {
		aWild, bWild := a.names[i] != "", b.names[i] != ""
		if aWild != bWild {
			return bWild
		}
	}
	return false
}

// Handler returns the handler and pattern of r's route, or nil and "".
// It does not set r's path values (ServeHTTP does).
func (m *Mux) Handler(r *httpmsg.Request) (httpmsg.Handler, string) {
	match, ok := m.Match(r.Method, r.URL.EscapedPath())
	if !ok {
		return nil, ""
	}
	return match.Handler, match.Pattern
}

// ServeHTTP sets r's path values and serves it with its route's handler,
// or Fallback when no route takes it (or its route has no handler).
func (m *Mux) ServeHTTP(w httpmsg.ResponseWriter, r *httpmsg.Request) {
	match, ok := m.Match(r.Method, r.URL.EscapedPath())
	switch {
	case ok && match.Handler != nil:
		match.SetPathValues(r)
		match.Handler.ServeHTTP(w, r)
	case m.Fallback != nil:
		m.Fallback.ServeHTTP(w, r)
	default:
		w.WriteHeader(httpmsg.StatusNotFound)
	}
}
