package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/tool"
)

// Headers of a webhook request.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the exact
	// body bytes under the tool's secret; check it with Verify.
	SignatureHeader = "X-Revenant-Signature"
	// CallIDHeader carries the call's id, minted by revenant.
	CallIDHeader = "X-Revenant-Call-Id"
	// IdempotencyKeyHeader carries the call's idempotency key, the same on
	// every execution of one call.
	IdempotencyKeyHeader = "Idempotency-Key"
)

// errorExcerpt is how much of a failed webhook's body its error quotes.
const errorExcerpt = 200

// WebhookSpec describes a webhook tool, usually read from configuration
// (package config).
type WebhookSpec struct {
	// Name is the tool's name, as the model calls it.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON schema of the arguments; nil means
	// {"type":"object"}.
	Parameters json.RawMessage
	// URL receives the POST. It is the operator's destination, trusted for
	// this webhook's client only (even on a private address); every other
	// rule of the egress policy still applies to anything else.
	URL string
	// Idempotent declares that the receiver deduplicates by Idempotency-Key,
	// so the call may be sent again after a crash.
	Idempotent bool
	// Secret signs each body (SignatureHeader). It never prints; at least
	// 16 bytes is wise (package config requires it).
	Secret Secret
	// Timeout bounds one call; zero takes the policy's.
	Timeout time.Duration
	// Permission is the configured decision for the tool ("allow", "ask" or
	// "deny"). Stored here for the permission layer, which enforces it.
	Permission string
}

// Webhook is a tool that POSTs its call's arguments, as JSON, to a
// configured URL. Create it with NewWebhook.
//
// Each request carries Content-Type: application/json, Idempotency-Key,
// X-Revenant-Call-Id and X-Revenant-Signature. Redirects are not followed:
// a signed body goes to the configured URL or nowhere. A 2xx answer's body
// (capped like http_request's, with a truncation marker) is the output; any
// other status is an error quoting the status and the start of the body.
//
// A Webhook prints as its name and URL; its secret never prints.
type Webhook struct {
	spec    WebhookSpec
	url     *url.URL
	policy  Egress
	client  *http.Client
	timeout time.Duration
}

var _ tool.Tool = (*Webhook)(nil)

// NewWebhook builds a webhook tool whose requests follow policy. It checks
// the URL's scheme, port and host against the policy now (and an IP
// literal's address); a host name's addresses are checked at each call.
func NewWebhook(spec WebhookSpec, policy Egress) (*Webhook, error) {
	if spec.Name == "" {
		return nil, errors.New("webhook: no name")
	}
	u, err := url.Parse(spec.URL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("webhook %s: url is not an absolute http or https URL", spec.Name)
	}
	// The URL is the operator's, not the model's: it is a trusted
	// destination of this webhook's client only, so a private webhook needs
	// no allowance that would also open its address to http_request.
	policy, err = policy.trusting(u)
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", spec.Name, err)
	}
	if spec.Secret.Len() == 0 {
		return nil, fmt.Errorf("webhook %s: no secret", spec.Name)
	}
	if spec.Timeout < 0 {
		return nil, fmt.Errorf("webhook %s: negative timeout", spec.Name)
	}
	if spec.Timeout > 0 {
		policy = policy.WithTimeout(spec.Timeout)
	}
	spec.Parameters = bytes.Clone(spec.Parameters)
	return &Webhook{spec: spec, url: u, policy: policy, client: Client(policy), timeout: policy.Timeout()}, nil
}

// Spec implements tool.Tool.
func (w *Webhook) Spec() model.ToolSpec {
	schema := w.spec.Parameters
	if schema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return model.ToolSpec{Name: w.spec.Name, Description: w.spec.Description, Schema: bytes.Clone(schema)}
}

// Idempotent implements tool.Tool: as configured.
func (w *Webhook) Idempotent() bool { return w.spec.Idempotent }

// Resources implements tool.Tool: "tool:" and the tool's name, like a
// tool.Func; what the webhook does is the receiver's business.
func (w *Webhook) Resources(json.RawMessage) ([]string, error) {
	return []string{"tool:" + w.spec.Name}, nil
}

// Limits implements tool.Tool: the tool's timeout plus a second's grace;
// the runner's default output cap.
func (w *Webhook) Limits() tool.Limits { return tool.Limits{Timeout: w.timeout + timeoutGrace} }

// Permission is the configured permission decision.
func (w *Webhook) Permission() string { return w.spec.Permission }

// String names the webhook and its URL.
func (w *Webhook) String() string {
	return fmt.Sprintf("webhook %s → %s", w.spec.Name, w.url.Redacted())
}

// Format implements fmt.Formatter: every verb prints String, so the secret
// in the unexported spec never does.
func (w *Webhook) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, w.String()) }

// Execute implements tool.Tool: POST the arguments, exactly as given, signed.
func (w *Webhook) Execute(ctx context.Context, call tool.Call) (string, error) {
	body := []byte(call.Arguments)
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if !json.Valid(body) {
		return "", fmt.Errorf("webhook %s: the arguments are not valid JSON", w.spec.Name)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, w.timeout, ErrTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url.String(), bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.spec.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(SignatureHeader, Sign([]byte(w.spec.Secret.Reveal()), body))
	if call.ID != "" {
		req.Header.Set(CallIDHeader, call.ID)
	}
	setIdempotencyKey(req, call.IdempotencyKey)

	resp, _, err := do(w.client, req, false)
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.spec.Name, requestError(ctx, w.timeout, nil, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	truncated := errors.Is(err, ErrTooLarge)
	if err != nil && !truncated {
		return "", fmt.Errorf("webhook %s: %s, then reading the body failed: %w", w.spec.Name, resp.Status, requestError(ctx, w.timeout, nil, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("webhook %s: %s%s", w.spec.Name, resp.Status, excerpt(data, truncated))
	}
	if len(data) == 0 {
		return fmt.Sprintf("The webhook answered %s with an empty body.", resp.Status), nil
	}
	return bodyText(data, truncated, w.policy.MaxResponseBytes()), nil
}

// excerpt is ": " and the start of a failed call's body, on one line;
// truncated says the body went on past data.
func excerpt(data []byte, truncated bool) string {
	cut := truncated || len(data) > errorExcerpt
	if len(data) > errorExcerpt {
		data = trimPartialRune(data[:errorExcerpt])
	}
	if !utf8.Valid(data) {
		return ""
	}
	s := strings.Join(strings.Fields(string(data)), " ")
	if s == "" {
		return ""
	}
	if cut {
		s += "…"
	}
	return ": " + s
}

// Sign returns the signature header value for body: "sha256=" and the hex
// HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is a valid signature of body under secret,
// comparing in constant time. Receivers should verify the exact bytes they
// read, before parsing them.
func Verify(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
