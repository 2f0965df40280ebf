package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/model"
)

// userAgent names revenant to the provider, as the tools' requests do,
// instead of Go's default; Config.Headers may set another.
const userAgent = "revenant"

// Doer sends one HTTP request: httpmsg.Doer. A host injects its own
// (Config.Client) to route model traffic through its egress; a host with
// net/http passes nethttp.Client(c) (core/httpmsg/nethttp).
type Doer = httpmsg.Doer

// DefaultMaxRetryAfter is the default cap on a provider's Retry-After.
const DefaultMaxRetryAfter = 60 * time.Second

// Config configures a provider. New validates it.
type Config struct {
	// BaseURL is the API root, an absolute http or https URL such as
	// https://api.openai.com/v1 or http://localhost:11434/v1. Requests go
	// to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Empty sends no
	// Authorization header (Ollama and vLLM need none).
	APIKey string
	// Model is the model name sent when a request names none. Required.
	Model string
	// Client sends the requests. Required: this package has no network of
	// its own, so that it links no HTTP client into a binary that does not
	// need one (the wasm guest, the Durable Object). A host with net/http
	// passes nethttp.Client(http.DefaultClient) or its own client.
	// Redirects are not followed (a Doer never does): the endpoint is the
	// configured one, and a 3xx answer is a permanent error.
	Client Doer
	// MaxRetryAfter caps the wait a provider asks for. Zero means
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Headers are extra request headers, such as OpenRouter's HTTP-Referer
	// and X-Title. An Authorization header here is used when APIKey is
	// empty. Values are treated as secrets: hidden when the Config is
	// printed, and redacted from errors (those of 8 bytes or more, and the
	// credential after a scheme such as "Bearer ").
	Headers map[string]string
}

// String describes the configuration with the key and header values
// redacted.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "openai.Config{BaseURL: %q, Model: %q, APIKey: %s", c.BaseURL, c.Model, redactedKey(c.APIKey))
	if len(c.Headers) > 0 {
		names := make([]string, 0, len(c.Headers))
		for name := range c.Headers {
			names = append(names, name)
		}
		httpmsg.SortStrings(names)
		fmt.Fprintf(&b, ", Headers: %s", strings.Join(names, ", "))
	}
	if c.MaxRetryAfter != 0 {
		fmt.Fprintf(&b, ", MaxRetryAfter: %s", c.MaxRetryAfter)
	}
	b.WriteString("}")
	return b.String()
}

// Format prints String for every verb, %#v included, so no format can
// reveal the key.
func (c Config) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// LogValue logs the configuration with the key redacted.
func (c Config) LogValue() logs.Value {
	return logs.GroupValue(
		logs.String("base_url", c.BaseURL),
		logs.String("model", c.Model),
		logs.String("api_key", redactedKey(c.APIKey)),
	)
}

func redactedKey(key string) string {
	if key == "" {
		return "none"
	}
	return redacted
}

const redacted = "[redacted]"

// Model is an OpenAI-compatible provider. It holds no state between calls
// and is safe for concurrent use.
type Model struct {
	endpoint      string
	name          string
	key           string
	client        Doer
	maxRetryAfter time.Duration
	headers       httpmsg.Header
	// secrets are what redact removes, longest first: the key and the
	// extra headers' values (secretsOf).
	secrets []string
}

var _ model.Model = (*Model)(nil)

// New validates cfg and returns the provider.
func New(cfg Config) (*Model, error) {
	endpoint, err := endpointOf(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai: no model name configured")
	}
	if cfg.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("openai: MaxRetryAfter is negative (%s)", cfg.MaxRetryAfter)
	}
	m := &Model{
		endpoint:      endpoint,
		name:          cfg.Model,
		key:           cfg.APIKey,
		client:        cfg.Client,
		maxRetryAfter: cfg.MaxRetryAfter,
		headers:       httpmsg.Header{},
	}
	if m.maxRetryAfter == 0 {
		m.maxRetryAfter = DefaultMaxRetryAfter
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n\x00") {
		return nil, errors.New("openai: the API key contains a line break or NUL")
	}
	for name, value := range cfg.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("openai: invalid header name %q", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("openai: the value of header %q contains a line break or NUL", name)
		}
		m.headers.Set(name, value)
	}
	m.secrets = secretsOf(cfg)
	if m.client == nil {
		return nil, errors.New("openai: no client configured (Config.Client; a host with net/http passes nethttp.Client(http.DefaultClient))")
	}
	return m, nil
}

// endpointOf checks the base URL and returns the chat completions URL.
func endpointOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		// url's error quotes the input; a base URL is not a secret.
		return "", fmt.Errorf("openai: parse base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("openai: base URL %q is not an absolute http or https URL (like https://api.openai.com/v1)", base)
	}
	if u.Host == "" {
		return "", fmt.Errorf("openai: base URL %q has no host", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("openai: base URL %q has a query or fragment; it must be the API root", base)
	}
	return strings.TrimRight(u.String(), "/") + "/chat/completions", nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r >= 0x7f || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// Name implements model.Model: the configured model name.
func (m *Model) Name() string { return m.name }

// String describes the provider without its key. String, Format and
// LogValue have value receivers so that printing a Model value, not only a
// pointer, cannot reveal the key.
func (m Model) String() string {
	return fmt.Sprintf("openai.Model{endpoint: %q, model: %q, key: %s}", m.endpoint, m.name, redactedKey(m.key))
}

// Format prints String for every verb, so no format can reveal the key.
func (m Model) Format(f fmt.State, _ rune) { io.WriteString(f, m.String()) }

// LogValue logs the provider without its key.
func (m Model) LogValue() logs.Value {
	return logs.GroupValue(logs.String("endpoint", m.endpoint), logs.String("model", m.name))
}

// Stream implements model.Model. It sends the request and returns once the
// response headers arrived; the body is read by Recv. ctx bounds the whole
// exchange: when it ends, a Recv waiting for the body returns.
//
// Failures: ctx's error when ctx ended; a retryable *model.Error for
// transport failures and HTTP 408, 429 and 5xx; a permanent *model.Error for
// other HTTP errors; a plain error when the request cannot be built.
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body, err := m.requestBody(req)
	if err != nil {
		return nil, err
	}
	hreq, err := httpmsg.NewRequest(ctx, httpmsg.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: build request: %s", m.redact(err.Error()))
	}
	hreq.Header.Set("User-Agent", userAgent) // the configured headers may name another
	for name, values := range m.headers {
		hreq.Header[name] = values
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if m.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+m.key)
	}
	resp, err := m.client.Do(hreq)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, sendError(err, m.redact)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, m.statusError(resp)
	}
	mt := mediaType(resp.Header)
	if mt == "application/json" {
		defer resp.Body.Close()
		return m.completion(ctx, resp.Body)
	}
	return newStream(ctx, resp.Body, mt, m.redact), nil
}

// mediaType returns the Content-Type's media type in lower case, without
// its parameters ("Application/JSON; charset=utf-8" → "application/json").
// Not mime.ParseMediaType: only the type is wanted, and package mime's
// initialisation (it reads the system's type files) cost the wasm guest
// 26 KB of its gzip size.
func mediaType(h httpmsg.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// redact removes the key and the extra headers' values from a text about
// to leave the package.
func (m *Model) redact(s string) string {
	for _, secret := range m.secrets {
		s = replaceAll(s, secret, redacted)
	}
	return s
}

// replaceAll is strings.ReplaceAll for an old that is not empty (every
// secret is), written out: strings.Replace cost the wasm guest 2 KB gzip.
func replaceAll(s, old, repl string) string {
	if old == "" {
		return s // strings.ReplaceAll would insert repl between runes; no secret is empty
	}
	i := strings.Index(s, old)
	if i < 0 {
		return s
	}
	var b strings.Builder
	for ; i >= 0; i = strings.Index(s, old) {
		b.WriteString(s[:i])
		b.WriteString(repl)
		s = s[i+len(old):]
	}
	b.WriteString(s)
	return b.String()
}

// minHeaderSecret is the shortest header value (or credential after its
// scheme) redacted: shorter ones ("1", "en") are not secrets, and hiding
// every occurrence of them would garble the provider's messages.
const minHeaderSecret = 8

// secretsOf lists what a model's texts must not show, longest first so
// that a value containing another is removed whole: the key, and each
// extra header's value (Config.Headers are treated as secrets: an
// Authorization header stands in for the key when there is none) with, for
// a value with a scheme ("Bearer sk-…"), the credential after it too,
// which is what a provider quotes back.
func secretsOf(cfg Config) []string {
	var out []string
	add := func(v string) {
		if slices.Contains(out, v) {
			return
		}
		// Insertion by length, longest first: a handful of values, and
		// slices.SortFunc would add 7 KB to the wasm guest's gzip.
		i := len(out)
		out = append(out, v)
		for ; i > 0 && len(out[i-1]) < len(v); i-- {
			out[i] = out[i-1]
		}
		out[i] = v
	}
	if cfg.APIKey != "" {
		add(cfg.APIKey)
	}
	for _, v := range cfg.Headers {
		v = strings.TrimSpace(v)
		if len(v) >= minHeaderSecret {
			add(v)
		}
		if i := strings.LastIndexByte(v, ' '); i >= 0 && len(v)-i-1 >= minHeaderSecret {
			add(v[i+1:])
		}
	}
	return out
}

// The request body, as the chat completions API takes it.
type (
	chatRequest struct {
		Model         string        `json:"model"`
		Messages      []chatMessage `json:"messages"`
		Tools         []chatTool    `json:"tools,omitempty"`
		Stream        bool          `json:"stream"`
		StreamOptions streamOptions `json:"stream_options"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	chatMessage struct {
		Role string `json:"role"`
		// Content is nil only for an assistant message with tool calls and
		// no text, sent as null.
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function chatToolSpec `json:"function"`
	}
	chatToolSpec struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

// emptySchema is sent for a tool that declares no schema: providers
// require an object schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// requestBody encodes req. Continuation notices are plain user messages.
func (m *Model) requestBody(req model.Request) ([]byte, error) {
	body := chatRequest{
		Model:         m.name,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
	}
	if req.Model != "" {
		body.Model = req.Model
	}
	if req.System != "" {
		body.Messages = append(body.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for i, msg := range req.Messages {
		out := chatMessage{Role: msg.Role, Content: &msg.Text}
		switch {
		case msg.Notice:
			out.Role = "user"
		case msg.Role == model.RoleUser, msg.Role == model.RoleSystem:
		case msg.Role == model.RoleAssistant:
			for _, c := range msg.ToolCalls {
				args := c.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				out.ToolCalls = append(out.ToolCalls, chatToolCall{ID: c.ID, Type: "function", Function: chatFunction{Name: c.Name, Arguments: args}})
			}
			if msg.Text == "" && len(msg.ToolCalls) > 0 {
				out.Content = nil
			}
		case msg.Role == model.RoleTool:
			// No "name": the chat completions schema has none for tool
			// messages, and strict servers reject unknown members.
			out.ToolCallID = msg.ToolCallID
		default:
			return nil, fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
		body.Messages = append(body.Messages, out)
	}
	for _, spec := range req.Tools {
		params := spec.Schema
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		}
		body.Tools = append(body.Tools, chatTool{Type: "function", Function: chatToolSpec{Name: spec.Name, Description: spec.Description, Parameters: params}})
	}
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	return out, nil
}
