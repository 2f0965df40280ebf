package httpargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Args is one http_request call's arguments, checked by Parse.
type Args struct {
	// Method is GET, HEAD, POST, PUT, PATCH or DELETE: the model's,
	// uppercased, or GET if it gave none.
	Method string
	// URL is absolute and has a host.
	URL *url.URL
	// Headers are the model's, valid to send, none of them reserved.
	Headers map[string]string
	// Body is empty for HEAD.
	Body string
}

// maxHostLen is the longest host name DNS can resolve (RFC 1035: 255
// octets on the wire, 253 written out). A longer one could never be
// reached, and its permission resource would be as long as the model
// made it.
const maxHostLen = 253

// reserved are the headers the model may not set: the client writes them
// itself.
var reserved = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true}

// Parse decodes and checks raw, the tool's JSON arguments. Its errors start
// "invalid arguments: " and say what the model must change.
func Parse(raw json.RawMessage) (Args, error) {
	var in struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Args{}, fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	a := Args{Method: strings.ToUpper(in.Method), Headers: in.Headers, Body: in.Body}
	switch a.Method {
	case "":
		a.Method = httpmsg.MethodGet
	case httpmsg.MethodGet, httpmsg.MethodHead, httpmsg.MethodPost, httpmsg.MethodPut, httpmsg.MethodPatch, httpmsg.MethodDelete:
	default:
		return Args{}, fmt.Errorf("invalid arguments: method %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", in.Method)
	}
	u, err := url.Parse(in.URL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return Args{}, fmt.Errorf("invalid arguments: url %q is not an absolute http or https URL", in.URL)
	}
	if n := len(NormalizeHost(u.Hostname())); n > maxHostLen {
		return Args{}, fmt.Errorf("invalid arguments: the url's host is %d bytes long; a host name has at most %d", n, maxHostLen)
	}
	a.URL = u
	if err := checkHeaders(in.Headers); err != nil {
		return Args{}, err
	}
	if a.Method == httpmsg.MethodHead && a.Body != "" {
		return Args{}, errors.New("invalid arguments: a HEAD request has no body")
	}
	return a, nil
}

// checkHeaders refuses a header the client would refuse to send, or send
// as more than one field, and one the client writes itself.
func checkHeaders(h map[string]string) error {
	for k, v := range h {
		if !validHeaderName(k) {
			return fmt.Errorf("invalid arguments: header name %q is not a valid HTTP field name", k)
		}
		if reserved[httpmsg.CanonicalKey(k)] {
			return fmt.Errorf("invalid arguments: header %s cannot be set", k)
		}
		if !validHeaderValue(v) {
			return fmt.Errorf("invalid arguments: the value of header %s holds a control character (a line break, NUL, ...)", k)
		}
	}
	return nil
}

// Resources is the http_request tool's resources for raw: "http:" and the
// URL's host, normalized (NormalizeHost). A process that only declares the
// tool and sends its calls elsewhere (the wasm guest) uses it instead of
// tools/web's HTTPRequest, which needs a policy that can send.
func Resources(raw json.RawMessage) ([]string, error) {
	a, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return []string{Resource(a.URL)}, nil
}

// Resource is the permission resource of a request to u: "http:" and its
// host, normalized (NormalizeHost). tools/web asks the session's policy
// about each redirect's Resource too.
func Resource(u *url.URL) string {
	return "http:" + NormalizeHost(u.Hostname())
}

// NormalizeHost lowercases a host and drops a trailing dot, so that
// "API.Example.com." and "api.example.com" are one host: in a resource,
// and in tools/web's allow-lists, which must agree with it. An IP literal
// is written one way, IPv4 in IPv6 as IPv4: "::ffff:127.0.0.1" and
// "0:0:0:0:0:ffff:7f00:1" are "127.0.0.1", so a permission rule naming an
// address cannot be passed by spelling it otherwise.
func NormalizeHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

// validHeaderName reports whether name is an RFC 9110 token, as net/http
// requires of a header's name before it sends one.
func validHeaderName(name string) bool {
	return name != "" && tokenOnly(name)
}

// tokenOnly reports whether s holds token characters only.
func tokenOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v may be sent as a header value, as
// net/http checks it: no control character but horizontal tab, so no CR,
// LF or NUL that could end the field and start another (header injection)
// whatever client sends it.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
