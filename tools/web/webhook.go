package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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

// Headers of a webhook request. The signature follows the Standard
// Webhooks specification (https://www.standardwebhooks.com), so a receiver
// can check it with that specification's libraries, or with Verify.
const (
	// IDHeader carries the delivery's id: the call's idempotency key, the
	// same on every execution of one call.
	IDHeader = "webhook-id"
	// TimestampHeader carries the send time in Unix seconds.
	TimestampHeader = "webhook-timestamp"
	// SignatureHeader carries "v1," and the base64 HMAC-SHA256 of id, ".",
	// timestamp, "." and the exact body bytes, under the tool's signing key
	// (SigningKey); check it with Verify.
	SignatureHeader = "webhook-signature"
	// CallIDHeader carries the call's id, minted by revenant.
	CallIDHeader = "X-Revenant-Call-Id"
	// IdempotencyKeyHeader carries the call's idempotency key, the same on
	// every execution of one call (and the same as IDHeader).
	IdempotencyKeyHeader = "Idempotency-Key"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, either way, before Verify refuses it as stale (or from the
// future): the Standard Webhooks libraries' default.
const Tolerance = 5 * time.Minute

// secretPrefix marks a secret in the Standard Webhooks form: the base64 of
// the key bytes.
const secretPrefix = "whsec_"

// ErrUnverified is wrapped by every refusal of Verify.
var ErrUnverified = errors.New("webhook not verified")

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
	// Idempotent declares that the receiver deduplicates by webhook-id (the
	// same as Idempotency-Key), so the call may be sent again after a crash.
	Idempotent bool
	// Secret signs each request (SignatureHeader); SigningKey says how it
	// becomes the key. It never prints; at least 16 key bytes is wise
	// (package config requires it).
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
// Each request carries Content-Type: application/json, webhook-id (the
// call's idempotency key), webhook-timestamp (the send time),
// webhook-signature, Idempotency-Key and X-Revenant-Call-Id. A re-sent call
// (an idempotent one, after a crash) has the same id and body and a new
// timestamp, so a receiver refuses stale replays and deduplicates by id. The
// X-Revenant-Signature header of earlier versions (an HMAC of the body
// alone, which verified for ever) is no longer sent. Redirects are not
// followed: a signed body goes to the configured URL or nowhere. A 2xx
// answer's body (capped like http_request's, with a truncation marker) is
// the output; any other status is an error quoting the status and the start
// of the body.
//
// A Webhook prints as its name and URL; its secret never prints.
type Webhook struct {
	spec    WebhookSpec
	key     []byte // from spec.Secret; never printed (Format)
	url     *url.URL
	policy  Egress
	client  httpmsg.Doer
	timeout time.Duration
	now     func() time.Time // the send time; tests replace it
}

var _ tool.Tool = (*Webhook)(nil)

// NewWebhook builds a webhook tool whose requests follow policy. It checks
// the URL's scheme, port and host against the policy now (and an IP
// literal's address); a host name must be ASCII (an internationalized
// name in its xn-- form), and its addresses are checked at each call.
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
	key, err := SigningKey(spec.Secret.Reveal())
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", spec.Name, err)
	}
	if spec.Timeout < 0 {
		return nil, fmt.Errorf("webhook %s: negative timeout", spec.Name)
	}
	if spec.Timeout > 0 {
		policy = policy.WithTimeout(spec.Timeout)
	}
	spec.Parameters = bytes.Clone(spec.Parameters)
	return &Webhook{spec: spec, key: key, url: u, policy: policy, client: Client(policy), timeout: policy.Timeout(), now: time.Now}, nil
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
	if call.IdempotencyKey == "" {
		// The key is the delivery's webhook-id, which the signature covers
		// and receivers deduplicate by; the runner always sets it.
		return "", fmt.Errorf("webhook %s: the call has no idempotency key to send as %s", w.spec.Name, IDHeader)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, w.timeout, ErrTimeout)
	defer cancel()
	req, err := httpmsg.NewRequest(ctx, httpmsg.MethodPost, w.url.String(), bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.spec.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	sent := w.now()
	req.Header.Set(IDHeader, call.IdempotencyKey)
	req.Header.Set(TimestampHeader, strconv.FormatInt(sent.Unix(), 10))
	req.Header.Set(SignatureHeader, Sign(w.key, call.IdempotencyKey, sent, body))
	if call.ID != "" {
		req.Header.Set(CallIDHeader, call.ID)
	}
	setIdempotencyKey(req.Header, call.IdempotencyKey)
	// Only an idempotent webhook's receiver deduplicates by key, so only
	// it may have a delivery sent twice by a client that cannot tell
	// whether a failed connection delivered it (httpmsg.Request.Replayable).
	req.Replayable = w.spec.Idempotent

	// One round trip: a redirect is an answer (an error below), never
	// followed, so the signed body goes to the configured URL or nowhere.
	resp, err := w.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.spec.Name, requestError(ctx, w.timeout, nil, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	truncated := errors.Is(err, ErrTooLarge)
	if err != nil && !truncated {
		return "", fmt.Errorf("webhook %s: %s, then reading the body failed: %w", w.spec.Name, status(resp.StatusCode), requestError(ctx, w.timeout, nil, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("webhook %s: %s%s", w.spec.Name, status(resp.StatusCode), excerpt(data, truncated))
	}
	if len(data) == 0 {
		return fmt.Sprintf("The webhook answered %s with an empty body.", status(resp.StatusCode)), nil
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

// SigningKey turns a configured secret into HMAC key bytes. A secret in
// the Standard Webhooks form, "whsec_" and base64, is the key its base64
// decodes to, as every Standard Webhooks library reads it; any other secret
// is used as its raw bytes, so a receiver keys its HMAC with the secret
// string itself. The error never quotes the secret.
func SigningKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(key) == 0 {
		// err quotes the offending byte: of the secret.
		return nil, fmt.Errorf("decode secret: it starts with %q but no standard base64 key follows", secretPrefix)
	}
	return key, nil
}

// Sign returns the webhook-signature value of a delivery: "v1," and the
// base64 HMAC-SHA256, under key, of id, ".", the timestamp in Unix seconds,
// "." and body, as the Standard Webhooks specification defines it.
func Sign(key []byte, id string, timestamp time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(signature(key, id, timestamp.Unix(), body))
}

func signature(key []byte, id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery as a receiver should, before parsing body (the
// exact bytes read): the webhook-id and webhook-timestamp headers are
// present, the timestamp is within Tolerance of now, and one of the
// space-separated "v1," signatures in webhook-signature is the HMAC under
// key, compared in constant time. The receiver still deduplicates by
// webhook-id: a delivery re-sent after a crash verifies too. header is the
// delivery's: an http.Header or an httpmsg.Header is accepted as it is. The
// error wraps ErrUnverified.
func Verify(key []byte, header map[string][]string, body []byte, now time.Time) error {
	h := httpmsg.Header(header)
	id, stamp, sigs := h.Get(IDHeader), h.Get(TimestampHeader), h.Get(SignatureHeader)
	if id == "" || stamp == "" || sigs == "" {
		return fmt.Errorf("%w: missing %s, %s or %s", ErrUnverified, IDHeader, TimestampHeader, SignatureHeader)
	}
	unix, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not Unix seconds", ErrUnverified, TimestampHeader)
	}
	if age := now.Sub(time.Unix(unix, 0)); age > Tolerance || age < -Tolerance {
		return fmt.Errorf("%w: %s is %s from now, more than %s", ErrUnverified, TimestampHeader, age.Abs().Truncate(time.Second), Tolerance)
	}
	want := signature(key, id, unix, body)
	for _, sig := range strings.Fields(sigs) {
		encoded, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature in %s matches", ErrUnverified, SignatureHeader)
}
