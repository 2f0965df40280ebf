package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/tool"
)

// HTTPRequestName is the name of the http_request tool.
const HTTPRequestName = "http_request"

// ErrTimeout is wrapped by the tools' error when a request ran out of time.
var ErrTimeout = errors.New("request timed out")

// userAgent is sent unless the call sets its own.
const userAgent = "revenant"

// timeoutGrace is added to a tool's request timeout for the runner's wall
// limit, so that the tool's own timeout error, which names the request, is
// what the model sees.
const timeoutGrace = time.Second

var httpRequestSchema = json.RawMessage(`{"type":"object",` +
	`"properties":{` +
	`"method":{"type":"string","enum":["GET","HEAD","POST","PUT","PATCH","DELETE"],"description":"HTTP method; GET if omitted."},` +
	`"url":{"type":"string","description":"Absolute http or https URL."},` +
	`"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Request headers."},` +
	`"body":{"type":"string","description":"Request body."}},` +
	`"required":["url"],"additionalProperties":false}`)

// HTTPRequest is the http_request tool: one HTTP request to a URL the model
// chooses, under an Egress policy. Create it with NewHTTPRequest.
//
// Arguments: {method, url, headers, body}; method is GET, HEAD, POST, PUT,
// PATCH or DELETE (GET if omitted). The output is the status line, the
// Content-Type, the final URL when redirects were followed, and the body: up
// to the policy's MaxResponseBytes, then a truncation marker; a body that is
// not UTF-8 text is described, not shown. Any status is a successful call;
// a refused, failed or timed-out request is an error naming the reason.
//
// It is not idempotent (see the package documentation): after a crash it
// is never sent again. Every request carries the call's Idempotency-Key,
// replacing one the model set.
type HTTPRequest struct {
	policy Egress
	client httpmsg.Doer
}

var _ tool.Tool = (*HTTPRequest)(nil)

// NewHTTPRequest returns the http_request tool under policy.
func NewHTTPRequest(policy Egress) *HTTPRequest {
	return &HTTPRequest{policy: policy, client: Client(policy)}
}

// Spec implements tool.Tool.
func (t *HTTPRequest) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: HTTPRequestName,
		Description: "Send an HTTP request and return the status, content type and body. " +
			"Private, loopback, link-local and other special-purpose addresses, and this host's own, are refused unless allowed by configuration; " +
			"the body returned is capped. The request is never retried automatically.",
		Schema: httpRequestSchema,
	}
}

// Idempotent implements tool.Tool: false, whatever the method.
func (t *HTTPRequest) Idempotent() bool { return false }

// Resources implements tool.Tool: HTTPRequestResources.
func (t *HTTPRequest) Resources(args json.RawMessage) ([]string, error) {
	return HTTPRequestResources(args)
}

// HTTPRequestResources is the http_request tool's resources for args:
// "http:" and the URL's host, lowercased. A process that only declares the
// tool and sends its calls elsewhere (the wasm guest) uses it instead of
// an HTTPRequest, which needs a policy that can send.
func HTTPRequestResources(args json.RawMessage) ([]string, error) {
	a, err := parseHTTPArgs(args)
	if err != nil {
		return nil, err
	}
	return []string{"http:" + normalizeHost(a.url.Hostname())}, nil
}

// Limits implements tool.Tool: the policy's timeout plus a second's grace;
// the runner's default output cap.
func (t *HTTPRequest) Limits() tool.Limits {
	return tool.Limits{Timeout: t.policy.Timeout() + timeoutGrace}
}

// Execute implements tool.Tool.
func (t *HTTPRequest) Execute(ctx context.Context, call tool.Call) (string, error) {
	a, err := parseHTTPArgs(call.Arguments)
	if err != nil {
		return "", err
	}
	label := a.method + " " + a.url.Redacted()
	if err := t.policy.CheckURL(a.url); err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
	}
	timeout := t.policy.Timeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	defer cancel()
	req, err := httpmsg.NewRequest(ctx, a.method, a.url.String(), body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	for k, v := range a.headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	setIdempotencyKey(req.Header, call.IdempotencyKey)

	resp, final, redirected, err := follow(t.policy, t.client, req, a.body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, requestError(ctx, timeout, redirected, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	truncated := errors.Is(err, ErrTooLarge)
	if err != nil && !truncated {
		return "", fmt.Errorf("%s: read body: %w", label, requestError(ctx, timeout, nil, err))
	}

	var out strings.Builder
	fmt.Fprintf(&out, "HTTP %s\n", status(resp.StatusCode))
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		fmt.Fprintf(&out, "Content-Type: %s\n", ct)
	}
	if redirected != nil {
		fmt.Fprintf(&out, "Final-URL: %s\n", final.Redacted())
	}
	out.WriteString("\n")
	out.WriteString(bodyText(data, truncated, t.policy.MaxResponseBytes()))
	return out.String(), nil
}

// status is a status line's code and reason phrase, as net/http prints
// them ("404 Not Found"); the code alone when it has no phrase.
func status(code int) string {
	if text := httpmsg.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return strconv.Itoa(code)
}

// requestError turns a client error into what the model is told: the
// reason, without net/http's wrapping (a host's client may add it), with
// the redirect that led there.
func requestError(ctx context.Context, timeout time.Duration, redirected *url.URL, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(context.Cause(ctx), ErrTimeout) {
		err = fmt.Errorf("%w after %s", ErrTimeout, timeout)
	}
	if redirected != nil {
		err = fmt.Errorf("redirected to %s: %w", redirected.Redacted(), err)
	}
	return err
}

func setIdempotencyKey(h httpmsg.Header, key string) {
	if key == "" {
		h.Del(IdempotencyKeyHeader)
		return
	}
	h.Set(IdempotencyKeyHeader, key)
}

// bodyText is a response body as the model sees it.
func bodyText(data []byte, truncated bool, max int64) string {
	if truncated {
		data = trimPartialRune(data)
	}
	var s string
	switch {
	case !utf8.Valid(data) && truncated:
		s = fmt.Sprintf("[binary body larger than %d bytes not shown]", max)
	case !utf8.Valid(data):
		s = fmt.Sprintf("[binary body of %d bytes not shown]", len(data))
	default:
		s = string(data)
	}
	if truncated && utf8.Valid(data) {
		s += fmt.Sprintf("\n[response truncated: the body is larger than %d bytes; the first %d are shown]", max, len(data))
	}
	return s
}

// trimPartialRune drops an incomplete UTF-8 sequence cut off at the end.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

type httpArgs struct {
	method  string
	url     *url.URL
	headers map[string]string
	body    string
}

// Headers the model may not set: the client writes them itself.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true}

func parseHTTPArgs(raw json.RawMessage) (httpArgs, error) {
	var in struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return httpArgs{}, fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	a := httpArgs{method: strings.ToUpper(in.Method), headers: in.Headers, body: in.Body}
	switch a.method {
	case "":
		a.method = httpmsg.MethodGet
	case httpmsg.MethodGet, httpmsg.MethodHead, httpmsg.MethodPost, httpmsg.MethodPut, httpmsg.MethodPatch, httpmsg.MethodDelete:
	default:
		return httpArgs{}, fmt.Errorf("invalid arguments: method %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", in.Method)
	}
	u, err := url.Parse(in.URL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return httpArgs{}, fmt.Errorf("invalid arguments: url %q is not an absolute http or https URL", in.URL)
	}
	a.url = u
	for k, v := range in.Headers {
		if !validHeaderName(k) {
			return httpArgs{}, fmt.Errorf("invalid arguments: header name %q is not a valid HTTP field name", k)
		}
		if reservedHeaders[httpmsg.CanonicalKey(k)] {
			return httpArgs{}, fmt.Errorf("invalid arguments: header %s cannot be set", k)
		}
		if !validHeaderValue(v) {
			return httpArgs{}, fmt.Errorf("invalid arguments: the value of header %s holds a control character (a line break, NUL, ...)", k)
		}
	}
	if a.method == httpmsg.MethodHead && a.body != "" {
		return httpArgs{}, errors.New("invalid arguments: a HEAD request has no body")
	}
	return a, nil
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
