package abi

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
)

// Request is one API request delivered to the guest (revenant_request).
type Request struct {
	Method   string
	Path     string // escaped path, such as /v1/sessions/abc/events
	RawQuery string
	Header   httpmsg.Header
	Body     []byte
}

// Encode returns the wire form.
func (r Request) Encode() []byte {
	var e Encoder
	e.String(r.Method)
	e.String(r.Path)
	e.String(r.RawQuery)
	encodeHeader(&e, r.Header)
	e.Blob(r.Body)
	return e.Bytes()
}

// DecodeRequest reads a Request.
func DecodeRequest(b []byte) (Request, error) {
	d := NewDecoder(b)
	r := Request{Method: d.String(), Path: d.String(), RawQuery: d.String(), Header: decodeHeader(d), Body: d.Blob()}
	return r, d.Finish()
}

// ResponsePart is one piece of an API response (the respond import): a
// head, body chunks, an end. An event stream sends a chunk per flush.
type ResponsePart struct {
	Kind   PartKind
	Status int            // PartHead
	Header httpmsg.Header // PartHead
	Body   []byte         // PartBody
	Timer  uint64         // PartDrain: the timer the host fires once the client took the parts before it
	// Aborted (PartEnd, since 1.11, MinorAbort, only to a host that
	// announced it): the handler failed after the head was sent, so the
	// response is cut short; the host aborts it for its client (drops
	// the connection or resets the stream) rather than ending it as if
	// complete. Encoded as a bool true after the kind; a clean end has
	// no field, so each end has one encoding.
	Aborted bool
}

// Encode returns the wire form.
func (p ResponsePart) Encode() []byte {
	var e Encoder
	e.Byte(byte(p.Kind))
	switch p.Kind {
	case PartHead:
		e.Uvarint(uint64(p.Status))
		encodeHeader(&e, p.Header)
	case PartBody:
		e.Blob(p.Body)
	case PartDrain:
		e.Uvarint(p.Timer)
	case PartEnd:
		if p.Aborted {
			e.Bool(true)
		}
	}
	return e.Bytes()
}

// DecodeResponsePart reads a ResponsePart.
func DecodeResponsePart(b []byte) (ResponsePart, error) {
	d := NewDecoder(b)
	p := ResponsePart{Kind: PartKind(d.Byte())}
	switch p.Kind {
	case PartHead:
		p.Status = int(d.Uvarint())
		p.Header = decodeHeader(d)
		if p.Status < 100 || p.Status > 999 {
			d.fail("status %d", p.Status)
		}
	case PartBody:
		p.Body = d.Blob()
	case PartDrain:
		p.Timer = d.Uvarint()
	case PartEnd:
		if len(d.b) > 0 {
			if p.Aborted = d.Bool(); !p.Aborted {
				d.fail("end: aborted false (a clean end has no field)")
			}
		}
	default:
		d.fail("part kind %d", p.Kind)
	}
	return p, d.Finish()
}

// EgressRequest is an outbound HTTP request the guest asks the host to make
// (egress_start). The answer comes back through revenant_egress_response,
// revenant_egress_chunk and revenant_egress_end.
type EgressRequest struct {
	Kind   EgressKind
	Target string // EgressTool: the tool's name
	Method string
	URL    string
	Header httpmsg.Header
	Body   []byte
	// Epoch (since ABI 1.2, MinorEgressEpoch) is the epoch the guest's
	// instance holds as it starts the request, or NoEpoch while it has
	// none (it booted read-only and has written nothing). A host that owns
	// egress performs the request only if the tree's epoch in the database
	// still equals it, so a superseded instance gets nothing out
	// (docs/abi.md §4, "Epoch fence").
	Epoch int64
	// HasEpoch says Epoch is on the wire. It is the message's last field,
	// and a guest sends it only to a host that announced 1.2 or later at
	// boot: an older host's decoder refuses trailing bytes. A request
	// without it (an older guest, or an older host) cannot be checked.
	HasEpoch bool
}

// MinorEgressEpoch is the minor version that added EgressRequest.Epoch: a
// guest sends it to a host whose BootConfig announces at least this.
const MinorEgressEpoch = 2

// NoEpoch is EgressRequest.Epoch of an instance that holds no epoch yet.
// Epochs start at 1, so no tree ever has it: a host refuses the request.
const NoEpoch int64 = 0

// Encode returns the wire form.
func (r EgressRequest) Encode() []byte {
	var e Encoder
	e.Byte(byte(r.Kind))
	e.String(r.Target)
	e.String(r.Method)
	e.String(r.URL)
	encodeHeader(&e, r.Header)
	e.Blob(r.Body)
	if r.HasEpoch {
		e.Uvarint(uint64(max(r.Epoch, 0)))
	}
	return e.Bytes()
}

// DecodeEgressRequest reads an EgressRequest, with its epoch if bytes
// follow the body.
func DecodeEgressRequest(b []byte) (EgressRequest, error) {
	d := NewDecoder(b)
	r := EgressRequest{Kind: EgressKind(d.Byte()), Target: d.String(), Method: d.String(), URL: d.String(), Header: decodeHeader(d), Body: d.Blob()}
	if r.Kind != EgressModel && r.Kind != EgressTool && d.err == nil {
		d.fail("egress kind %d", r.Kind)
	}
	if d.err == nil && len(d.b) > 0 {
		epoch := d.Uvarint()
		if epoch > math.MaxInt64 {
			d.fail("epoch %d out of range", epoch)
		}
		r.Epoch, r.HasEpoch = int64(epoch), true
	}
	return r, d.Finish()
}

// EgressResponse is the head of an egress answer.
type EgressResponse struct {
	Status int
	Header httpmsg.Header
}

// Encode returns the wire form.
func (r EgressResponse) Encode() []byte {
	var e Encoder
	e.Uvarint(uint64(r.Status))
	encodeHeader(&e, r.Header)
	return e.Bytes()
}

// DecodeEgressResponse reads an EgressResponse.
func DecodeEgressResponse(b []byte) (EgressResponse, error) {
	d := NewDecoder(b)
	r := EgressResponse{Status: int(d.Uvarint()), Header: decodeHeader(d)}
	return r, d.Finish()
}

// EgressEnd ends an egress answer (revenant_egress_end): a clean end of
// the body (EndOK), or a failure with its code and message. The code is
// how the guest tells a fenced request from a network error: never by the
// message, which is for people.
type EgressEnd struct {
	Code    EndCode
	Message string
}

// MinorEgressEndCode is the minor version that gave revenant_egress_end a
// code: between a host and a guest that both announced at least this, its
// input is an encoded EgressEnd; otherwise it is the message's text alone
// (empty: a clean end), and a receiver takes any text as EndError.
const MinorEgressEndCode = 3

// EncodeFor returns the wire form for a peer of minor version peerMinor
// (the lower of the two sides' announced minors). A clean end is empty in
// every version, so it passes no buffer.
func (e EgressEnd) EncodeFor(peerMinor uint16) []byte {
	if e.Code == EndOK {
		return nil
	}
	if peerMinor < MinorEgressEndCode {
		return []byte(e.Message)
	}
	var enc Encoder
	enc.Uvarint(uint64(e.Code))
	enc.String(e.Message)
	return enc.Bytes()
}

// DecodeEgressEnd reads an EgressEnd sent by a peer of minor version
// peerMinor. Empty input is a clean end. A code this version does not know
// is kept: the receiver treats it as any failure.
func DecodeEgressEnd(b []byte, peerMinor uint16) (EgressEnd, error) {
	if len(b) == 0 {
		return EgressEnd{}, nil
	}
	if peerMinor < MinorEgressEndCode {
		return EgressEnd{Code: EndError, Message: string(b)}, nil
	}
	d := NewDecoder(b)
	code := d.Uvarint()
	e := EgressEnd{Code: EndCode(code), Message: d.String()}
	if d.err == nil && (code == uint64(EndOK) || code > math.MaxUint8) {
		d.fail("egress end code %d", code)
	}
	return e, d.Finish()
}

// ToolCall is the body of an EgressTool request.
type ToolCall struct {
	ID             string
	Name           string
	Arguments      []byte
	IdempotencyKey string
	SessionID      string
	// SessionRules and SavedRules (since ABI 1.5, MinorToolCallRules) are
	// the session's own permission rules and the tree's saved always rules
	// the guest decided the call by (tool.Call's). With the operator's,
	// which the host has from its configuration, they are the policy the
	// host decides what the running call reaches by (an http_request
	// redirect), as the runner does in process. A call from an older guest
	// carries none.
	SessionRules []permission.Rule
	SavedRules   []permission.Rule
}

// MinorToolCallRules is the minor version that added ToolCall's rules at
// its end: a guest sends them only to a host whose BootConfig announces
// at least this (EncodeFor), since an older host's decoder refuses
// trailing bytes.
const MinorToolCallRules = 5

// Encode returns the wire form for a host of this package's version.
func (c ToolCall) Encode() []byte { return c.EncodeFor(Minor) }

// EncodeFor returns the wire form for a host that announced ABI minor
// version hostMinor: without the rules for a host older than 1.5.
func (c ToolCall) EncodeFor(hostMinor uint16) []byte {
	var e Encoder
	e.String(c.ID)
	e.String(c.Name)
	e.Blob(c.Arguments)
	e.String(c.IdempotencyKey)
	e.String(c.SessionID)
	if hostMinor >= MinorToolCallRules {
		encodeRules(&e, c.SessionRules)
		encodeRules(&e, c.SavedRules)
	}
	return e.Bytes()
}

// DecodeToolCall reads a ToolCall, with its rules if bytes follow the
// session id (both lists, or the message is malformed).
func DecodeToolCall(b []byte) (ToolCall, error) {
	d := NewDecoder(b)
	c := ToolCall{ID: d.String(), Name: d.String(), Arguments: d.Blob(), IdempotencyKey: d.String(), SessionID: d.String()}
	if d.err == nil && len(d.b) > 0 {
		c.SessionRules = decodeRules(d)
		c.SavedRules = decodeRules(d)
	}
	return c, d.Finish()
}

// encodeRules writes permission rules: uvarint count, per rule action,
// resource and decision strings and the exact bool.
func encodeRules(e *Encoder, rules []permission.Rule) {
	e.Uvarint(uint64(len(rules)))
	for _, r := range rules {
		e.String(r.Action)
		e.String(r.Resource)
		e.String(string(r.Decision))
		e.Bool(r.Exact)
	}
}

// decodeRules reads what encodeRules writes (nil for none).
func decodeRules(d *Decoder) []permission.Rule {
	var rules []permission.Rule
	n := d.Count()
	for range n {
		if d.err != nil {
			return rules
		}
		rules = append(rules, permission.Rule{Action: d.String(), Resource: d.String(), Decision: permission.Decision(d.String()), Exact: d.Bool()})
	}
	return rules
}

// Emitted is an event leaving the guest (the emit import): a durable event,
// emitted once its transaction committed, or a live delta (Seq 0, no ID).
type Emitted struct {
	ID        string
	SessionID string
	Seq       int64
	Type      string
	At        int64 // ms
	Data      []byte
}

// Durable reports whether the event is stored (a delta is not).
func (m Emitted) Durable() bool { return m.Seq > 0 }

// Encode returns the wire form.
func (m Emitted) Encode() []byte {
	var e Encoder
	e.String(m.ID)
	e.String(m.SessionID)
	e.Varint(m.Seq)
	e.String(m.Type)
	e.Varint(m.At)
	e.Blob(m.Data)
	return e.Bytes()
}

// DecodeEmitted reads an Emitted.
func DecodeEmitted(b []byte) (Emitted, error) {
	d := NewDecoder(b)
	m := Emitted{ID: d.String(), SessionID: d.String(), Seq: d.Varint(), Type: d.String(), At: d.Varint(), Data: d.Blob()}
	return m, d.Finish()
}

// Statement is one SQL statement with its arguments (sql_exec, sql_query).
// Arguments are nil, int64, float64, string or []byte; the encoder also
// takes int and bool, sent as integers.
type Statement struct {
	Query string
	Args  []any
}

// Encode returns the wire form, or an error for an unsupported argument.
func (s Statement) Encode() ([]byte, error) {
	// Sized up front: one allocation per statement (the guest encodes one
	// per SQL call, and allocation is dear in wasm).
	size := len(s.Query) + binary.MaxVarintLen64*(2+len(s.Args))
	for _, a := range s.Args {
		switch x := a.(type) {
		case string:
			size += len(x)
		case []byte:
			size += len(x)
		}
	}
	e := Encoder{b: make([]byte, 0, size)}
	e.String(s.Query)
	e.Uvarint(uint64(len(s.Args)))
	for i, a := range s.Args {
		if err := encodeValue(&e, a); err != nil {
			return nil, fmt.Errorf("encode argument %d: %w", i+1, err)
		}
	}
	return e.Bytes(), nil
}

// DecodeStatement reads a Statement.
func DecodeStatement(b []byte) (Statement, error) {
	d := NewDecoder(b)
	s := Statement{Query: d.String()}
	n := d.Count()
	if n > 0 {
		s.Args = make([]any, 0, n)
	}
	for range n {
		s.Args = append(s.Args, decodeValue(d))
	}
	return s, d.Finish()
}

func encodeValue(e *Encoder, v any) error {
	switch x := v.(type) {
	case nil:
		e.Byte(ValueNull)
	case int64:
		e.Byte(ValueInt)
		e.Varint(x)
	case int:
		e.Byte(ValueInt)
		e.Varint(int64(x))
	case bool:
		e.Byte(ValueInt)
		if x {
			e.Varint(1)
		} else {
			e.Varint(0)
		}
	case float64:
		e.Byte(ValueFloat)
		e.Float(x)
	case string:
		e.Byte(ValueText)
		e.String(x)
	case []byte:
		e.Byte(ValueBlob)
		e.Blob(x)
	default:
		return fmt.Errorf("unsupported type %T", v)
	}
	return nil
}

func decodeValue(d *Decoder) any {
	switch t := d.Byte(); t {
	case ValueNull:
		return nil
	case ValueInt:
		return d.Varint()
	case ValueFloat:
		return d.Float()
	case ValueText:
		return d.String()
	case ValueBlob:
		b := d.Blob()
		if b == nil {
			b = []byte{}
		}
		return b
	default:
		d.fail("value tag %d", t)
		return nil
	}
}

// Rows is a fully read result set (a sql_query result). Values are nil,
// int64, float64, string or []byte.
type Rows struct {
	Columns []string
	Values  [][]any
}

// Encode returns the wire form, or an error for an unsupported value.
func (r Rows) Encode() ([]byte, error) {
	var e Encoder
	e.Uvarint(uint64(len(r.Columns)))
	for _, c := range r.Columns {
		e.String(c)
	}
	e.Uvarint(uint64(len(r.Values)))
	for i, row := range r.Values {
		if len(row) != len(r.Columns) {
			return nil, fmt.Errorf("encode row %d: %d values for %d columns", i, len(row), len(r.Columns))
		}
		for _, v := range row {
			if err := encodeValue(&e, v); err != nil {
				return nil, fmt.Errorf("encode row %d: %w", i, err)
			}
		}
	}
	return e.Bytes(), nil
}

// Names interns column names across results: a decoder of many results of
// the same statements (the guest's) allocates each name once. The zero
// value is ready; it is not safe for concurrent use.
type Names struct{ m map[string]string }

// maxNames bounds a Names: names past it are allocated per result.
const maxNames = 1024

func (n *Names) intern(b []byte) string {
	if n == nil {
		return string(b)
	}
	if s, ok := n.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if n.m == nil {
		n.m = map[string]string{}
	}
	if len(n.m) < maxNames {
		n.m[s] = s
	}
	return s
}

// DecodeRows reads Rows. Its cells share one backing array, and the rows
// one slice: three allocations per result besides its strings and large
// integers, whatever its size (the guest decodes one per query).
func DecodeRows(b []byte) (Rows, error) { return DecodeRowsNames(b, nil) }

// DecodeRowsNames is DecodeRows taking column names from names (nil: none).
func DecodeRowsNames(b []byte, names *Names) (Rows, error) {
	d := Decoder{b: b}
	var r Rows
	nc := d.Count()
	r.Columns = make([]string, 0, nc)
	for range nc {
		r.Columns = append(r.Columns, names.intern(d.raw()))
	}
	nr := d.Count()
	switch {
	case nc == 0 && nr > 0:
		d.fail("%d rows without columns", nr)
	case nr > 0 && uint64(nr)*uint64(nc) > uint64(len(d.b)):
		// Every value takes at least its tag byte.
		d.fail("%d rows of %d columns past the buffer", nr, nc)
	}
	if d.err != nil || nr == 0 {
		return r, d.Finish()
	}
	cells := make([]any, nr*nc)
	r.Values = make([][]any, 0, nr)
	for i := range nr {
		row := cells[i*nc : (i+1)*nc : (i+1)*nc]
		for j := range row {
			row[j] = decodeValue(&d)
		}
		if d.err != nil {
			break
		}
		r.Values = append(r.Values, row)
	}
	return r, d.Finish()
}

// SQLError is a failed SQL import: the extended SQLite result code (so the
// guest classifies it by code, never by text) and the message.
type SQLError struct {
	Code    int64
	Message string
}

// Encode returns the wire form.
func (s SQLError) Encode() []byte {
	var e Encoder
	e.Varint(s.Code)
	e.String(s.Message)
	return e.Bytes()
}

// DecodeSQLError reads an SQLError.
func DecodeSQLError(b []byte) (SQLError, error) {
	d := NewDecoder(b)
	s := SQLError{Code: d.Varint(), Message: d.String()}
	return s, d.Finish()
}

// Model kinds of a BootConfig.
const (
	ModelOffline = "offline"
	ModelOpenAI  = "openai"
)

// Tool kinds of a ToolDecl.
const (
	ToolWebhook     = "webhook"
	ToolHTTPRequest = "http_request"
)

// BootConfig is everything a guest needs to serve its tree
// (revenant_boot). It carries no secret: no provider key, no webhook
// secret, only hashed API tokens. Zero fields take core's, the runner's and
// the API's documented defaults.
type BootConfig struct {
	// HostMajor and HostMinor are the host's ABI version; the guest refuses
	// a major version it does not know. Zero means Major and Minor.
	HostMajor, HostMinor uint16
	// TreeID is the tree's root session id: the only tree this guest
	// serves, and the id POST /v1/sessions creates.
	TreeID string

	Model ModelConfig
	Tools []ToolDecl
	// Settings are the tree's knobs, the same type every host configures
	// (core/settings); the guest maps them with settings.Configs.
	// Settings.MaxRetryAfter configures the OpenAI-compatible model.
	Settings settings.Settings
	// SystemPrompt is the runner's system prompt (runner.WithSystemPrompt),
	// for a session whose own configuration and the API's session defaults
	// give none. Default none.
	SystemPrompt string
	API          APIConfig
	// Permissions are the operator's permission rules (REVENANT_CONFIG
	// `permissions`, runner.WithPermissions), sent since 1.4 with each
	// tool's ToolDecl.Permission: a guest of 1.4 enforces the same
	// permission configuration as the host's own trees. A rule's Final
	// flag is sent since 1.8 (MinorOperatorPolicy).
	Permissions []permission.Rule
	// AllowedModels are the models a session may name
	// (runner.WithAllowedModels, api.Config.WithAllowedModels); nil allows
	// any. Since 1.8 (MinorOperatorPolicy).
	AllowedModels []string
	// Drain says the host answers a PartDrain by firing its timer
	// (ExportTimer) once the client took what was sent before it:
	// the guest's response writer then drains (httpmsg.Drainer), so an
	// event stream's catch-up sends its next page of the log only when the
	// client took the last, as on the other hosts. Without it the guest
	// never waits (a host that buffers a response whole, a simulator).
	// Since 1.9 (MinorDrain).
	Drain bool
}

// MinorMaxSubagents is the minor version that added the tree's sub-agent
// limit (Settings.MaxSubagents) at BootConfig's end, after the drain flag:
// a host sends it only to a guest that announces at least this
// (EncodeFor); an older guest has no such limit, only the depth limit.
const MinorMaxSubagents = 10

// MinorDrain is the minor version that added PartDrain and
// BootConfig.Drain, at BootConfig's end after the
// operator policy. A host sends Drain only to a guest that announces at
// least this (EncodeFor).
const MinorDrain = 9

// MinorOperatorPolicy is the minor version that added the operator's
// policy at BootConfig's end, after the queue cap: each permission rule's
// Final flag and the allowed models. A host sends it only to a guest that
// announces at least this (EncodeFor), and refuses to boot an older guest
// with a final rule or an allow-list (wasm/runtime), which it would not
// enforce.
const MinorOperatorPolicy = 8

// MinorQueueCap is the minor version that added the queue cap
// (Settings.QueueCap) at BootConfig's end, after the permission
// configuration: a host sends it only to a guest that announces at least
// this (EncodeFor); an older guest keeps the default cap.
const MinorQueueCap = 7

// MinorPermissions is the minor version that added the permission
// configuration (ToolDecl.Permission, BootConfig.Permissions) at
// BootConfig's end, after the page sizes.
const MinorPermissions = 4

// MinorPageSizes is the minor version that added the page sizes
// (Settings.SessionPageSize, MessagePageSize) at BootConfig's end: a host
// sends them only to a guest that announces at least this (EncodeFor).
const MinorPageSizes = 3

// ModelConfig selects the model.
type ModelConfig struct {
	Kind string // ModelOffline (default) or ModelOpenAI
	// WordDelay paces the offline model (host timers).
	WordDelay time.Duration
	// BaseURL and Name configure the OpenAI-compatible provider; its key
	// stays with the host, which adds it to every EgressModel request.
	BaseURL string
	Name    string
}

// ToolDecl declares a tool whose HTTP side the host performs (EgressTool).
type ToolDecl struct {
	Kind        string // ToolWebhook or ToolHTTPRequest
	Name        string
	Description string
	Schema      []byte
	Idempotent  bool
	Timeout     time.Duration
	OutputCap   int
	MaxBytes    int64 // ToolHTTPRequest: the policy's body cap, for the tool's description of limits
	// Permission is the tool's configured default decision (a webhook's
	// `permission`: "allow", "ask", "deny"); empty asks. Since 1.4.
	Permission string
}

// APIConfig configures the guest's API handler beyond its Settings.
type APIConfig struct {
	// Tokens is a REVENANT_TOKENS spec; use the "sha256:" form so no token
	// enters the guest (a host that authenticates requests itself forwards
	// stand-ins instead of tokens: see host.HashTokens). Empty serves the
	// anonymous principal.
	Tokens string
	// Session defaults for POST /v1/sessions.
	SystemPrompt string
	ModelName    string
	Tools        *[]string
}

// encodeCount writes a count whose zero is meaningful the way 1.0 wrote
// its pointer: absent for the default (0), present for a value, None as a
// present 0.
func encodeCount(e *Encoder, n int) {
	e.Bool(n != 0)
	if n != 0 {
		e.Varint(int64(max(n, 0)))
	}
}

// decodeCount reads what encodeCount writes.
func decodeCount(d *Decoder, name string) int {
	if !d.Bool() {
		return 0
	}
	switch v := d.Varint(); {
	case v < 0:
		d.fail("%s %d is negative", name, v)
		return 0
	case v == 0:
		return settings.None
	default:
		return int(v)
	}
}

// Encode returns the wire form for a guest of this package's version.
func (c BootConfig) Encode() []byte { return c.EncodeFor(Minor) }

// EncodeFor returns the wire form for a guest that announced ABI minor
// version guestMinor: the fields later minors append are left out for an
// older guest, whose decoder would refuse them (docs/abi.md §7).
func (c BootConfig) EncodeFor(guestMinor uint16) []byte {
	var e Encoder
	e.Uvarint(uint64(c.HostMajor))
	e.Uvarint(uint64(c.HostMinor))
	e.String(c.TreeID)
	m, s := c.Model, c.Settings
	e.String(m.Kind)
	e.Varint(int64(m.WordDelay))
	e.String(m.BaseURL)
	e.String(m.Name)
	e.Varint(int64(s.MaxRetryAfter))
	e.Uvarint(uint64(len(c.Tools)))
	for _, t := range c.Tools {
		e.String(t.Kind)
		e.String(t.Name)
		e.String(t.Description)
		e.Blob(t.Schema)
		e.Bool(t.Idempotent)
		e.Varint(int64(t.Timeout))
		e.Varint(int64(t.OutputCap))
		e.Varint(t.MaxBytes)
	}
	encodeCount(&e, s.ResumeBudget)
	e.Varint(int64(s.MaxClaimAge))
	e.Varint(int64(s.WakeInterval))
	e.Varint(int64(s.InterruptGrace))
	e.Varint(int64(s.StepCap))
	e.Varint(int64(s.StreamIdle))
	e.Varint(int64(s.StepWall))
	e.Varint(int64(s.ToolTimeout))
	e.Varint(int64(s.ToolOutputCap))
	e.Varint(int64(s.CheckpointEvery))
	e.Varint(int64(s.CheckpointBytes))
	encodeCount(&e, s.ModelRetries)
	e.Varint(int64(s.RetryInitial))
	e.Varint(int64(s.RetryMax))
	e.Varint(int64(s.ContextBytes))
	e.String(c.SystemPrompt)
	a := c.API
	e.String(a.Tokens)
	e.Varint(int64(s.Heartbeat))
	e.Varint(s.MaxBody)
	e.String(a.SystemPrompt)
	e.String(a.ModelName)
	e.Bool(a.Tools != nil)
	if a.Tools != nil {
		e.Uvarint(uint64(len(*a.Tools)))
		for _, t := range *a.Tools {
			e.String(t)
		}
	}
	if guestMinor >= MinorPageSizes {
		e.Varint(int64(s.SessionPageSize))
		e.Varint(int64(s.MessagePageSize))
	}
	if guestMinor >= MinorPermissions {
		e.Uvarint(uint64(len(c.Tools)))
		for _, t := range c.Tools {
			e.String(t.Permission)
		}
		encodeRules(&e, c.Permissions)
	}
	if guestMinor >= MinorQueueCap {
		e.Varint(int64(s.QueueCap))
	}
	if guestMinor >= MinorOperatorPolicy {
		e.Uvarint(uint64(len(c.Permissions)))
		for _, r := range c.Permissions {
			e.Bool(r.Final)
		}
		e.Bool(c.AllowedModels != nil)
		if c.AllowedModels != nil {
			e.Uvarint(uint64(len(c.AllowedModels)))
			for _, m := range c.AllowedModels {
				e.String(m)
			}
		}
	}
	if guestMinor >= MinorDrain {
		e.Bool(c.Drain)
	}
	if guestMinor >= MinorMaxSubagents {
		e.Varint(int64(s.MaxSubagents))
	}
	return e.Bytes()
}

// DecodeBootConfig reads a BootConfig, with the fields of later minor
// versions if bytes follow the 1.0 ones.
func DecodeBootConfig(b []byte) (BootConfig, error) {
	d := NewDecoder(b)
	var c BootConfig
	s := &c.Settings
	c.HostMajor = uint16(d.Uvarint())
	c.HostMinor = uint16(d.Uvarint())
	c.TreeID = d.String()
	c.Model = ModelConfig{Kind: d.String(), WordDelay: duration(d), BaseURL: d.String(), Name: d.String()}
	s.MaxRetryAfter = duration(d)
	n := d.Count()
	for range n {
		c.Tools = append(c.Tools, ToolDecl{Kind: d.String(), Name: d.String(), Description: d.String(), Schema: d.Blob(),
			Idempotent: d.Bool(), Timeout: duration(d), OutputCap: int(d.Varint()), MaxBytes: d.Varint()})
	}
	s.ResumeBudget = decodeCount(d, "resume budget")
	s.MaxClaimAge, s.WakeInterval, s.InterruptGrace = duration(d), duration(d), duration(d)
	s.StepCap, s.StreamIdle, s.StepWall, s.ToolTimeout = int(d.Varint()), duration(d), duration(d), duration(d)
	s.ToolOutputCap, s.CheckpointEvery, s.CheckpointBytes = int(d.Varint()), duration(d), int(d.Varint())
	s.ModelRetries = decodeCount(d, "model retries")
	s.RetryInitial, s.RetryMax, s.ContextBytes = duration(d), duration(d), int(d.Varint())
	c.SystemPrompt = d.String()
	c.API.Tokens = d.String()
	s.Heartbeat, s.MaxBody = duration(d), d.Varint()
	c.API.SystemPrompt, c.API.ModelName = d.String(), d.String()
	if d.Bool() {
		m := d.Count()
		tools := make([]string, 0, m)
		for range m {
			tools = append(tools, d.String())
		}
		c.API.Tools = &tools
	}
	if d.err == nil && len(d.b) > 0 {
		s.SessionPageSize, s.MessagePageSize = int(d.Varint()), int(d.Varint())
	}
	if d.err == nil && len(d.b) > 0 {
		decodePermissions(d, &c)
	}
	if d.err == nil && len(d.b) > 0 {
		s.QueueCap = int(d.Varint())
	}
	if d.err == nil && len(d.b) > 0 {
		decodeOperatorPolicy(d, &c)
	}
	if d.err == nil && len(d.b) > 0 {
		c.Drain = d.Bool()
	}
	if d.err == nil && len(d.b) > 0 {
		s.MaxSubagents = int(d.Varint())
	}
	return c, d.Finish()
}

// decodeOperatorPolicy reads the 1.8 operator policy: one final flag per
// permission rule, then the allowed models (absent for any).
func decodeOperatorPolicy(d *Decoder, c *BootConfig) {
	if n := d.Count(); n != len(c.Permissions) {
		d.fail("%d final flags for %d permission rules", n, len(c.Permissions))
		return
	}
	for i := range c.Permissions {
		c.Permissions[i].Final = d.Bool()
	}
	if d.Bool() {
		n := d.Count()
		models := make([]string, 0, n)
		for range n {
			models = append(models, d.String())
		}
		c.AllowedModels = models
	}
}

// decodePermissions reads the 1.4 permission configuration: one permission
// per declared tool, then the rules.
func decodePermissions(d *Decoder, c *BootConfig) {
	if n := d.Count(); n != len(c.Tools) {
		d.fail("%d tool permissions for %d tools", n, len(c.Tools))
		return
	}
	for i := range c.Tools {
		c.Tools[i].Permission = d.String()
	}
	c.Permissions = decodeRules(d)
}
