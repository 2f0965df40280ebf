package web

import (
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
	"github.com/revenantrt/revenant/tools/web/httpargs"
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
// to the policy's MaxResponseBytes, after a truncation marker when it is cut
// (bodyText); a body that is not UTF-8 text is described, not shown. Any status is a successful call;
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

// Resources implements tool.Tool: "http:" and the URL's host
// (httpargs.Resources, which the wasm guest uses alone).
func (t *HTTPRequest) Resources(args json.RawMessage) ([]string, error) {
	return httpargs.Resources(args)
}

// Limits implements tool.Tool: the policy's timeout plus a second's grace;
// the runner's default output cap.
func (t *HTTPRequest) Limits() tool.Limits {
	return tool.Limits{Timeout: t.policy.Timeout() + timeoutGrace}
}

// Execute implements tool.Tool.
func (t *HTTPRequest) Execute(ctx context.Context, call tool.Call) (string, error) {
	a, err := httpargs.Parse(call.Arguments)
	if err != nil {
		return "", err
	}
	label := a.Method + " " + a.URL.Redacted()
	if err := t.policy.CheckURL(a.URL); err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	var body io.Reader
	if a.Body != "" {
		body = strings.NewReader(a.Body)
	}
	timeout := t.policy.Timeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	defer cancel()
	req, err := httpmsg.NewRequest(ctx, a.Method, a.URL.String(), body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	setIdempotencyKey(req.Header, call.IdempotencyKey)

	resp, final, redirected, err := follow(t.policy, t.client, req, a.Body, call.Permit)
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
	} else if errors.Is(err, io.EOF) { // from sending: io.ReadAll returns no EOF
		// The server may have acted on the request before it hung up; it
		// is not sent again (unless it is a replayable, deduplicated one).
		err = fmt.Errorf("the connection closed before an answer, so the request may or may not have arrived: %w", err)
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

// bodyText is a response body as the model sees it. A truncated body's
// note comes first: the runner caps a tool's output (capOutput keeps its
// head), and a note at the end of a body longer than that cap would be
// cut off, leaving the model a count of the output, not of the body.
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
		s = fmt.Sprintf("[response truncated: the body is larger than %d bytes; the first %d are shown]\n", max, len(data)) + s
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
