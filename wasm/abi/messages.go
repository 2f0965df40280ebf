package abi

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// Request is one API request delivered to the guest (revenant_request).
type Request struct {
	Method   string
	Path     string // escaped path, such as /v1/sessions/abc/events
	RawQuery string
	Header   http.Header
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
	Status int         // PartHead
	Header http.Header // PartHead
	Body   []byte      // PartBody
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
	case PartEnd:
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
	Header http.Header
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
	Header http.Header
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

// ToolCall is the body of an EgressTool request.
type ToolCall struct {
	ID             string
	Name           string
	Arguments      []byte
	IdempotencyKey string
	SessionID      string
}

// Encode returns the wire form.
func (c ToolCall) Encode() []byte {
	var e Encoder
	e.String(c.ID)
	e.String(c.Name)
	e.Blob(c.Arguments)
	e.String(c.IdempotencyKey)
	e.String(c.SessionID)
	return e.Bytes()
}

// DecodeToolCall reads a ToolCall.
func DecodeToolCall(b []byte) (ToolCall, error) {
	d := NewDecoder(b)
	c := ToolCall{ID: d.String(), Name: d.String(), Arguments: d.Blob(), IdempotencyKey: d.String(), SessionID: d.String()}
	return c, d.Finish()
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
	var e Encoder
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

// DecodeRows reads Rows.
func DecodeRows(b []byte) (Rows, error) {
	d := NewDecoder(b)
	var r Rows
	nc := d.Count()
	r.Columns = make([]string, 0, nc)
	for range nc {
		r.Columns = append(r.Columns, d.String())
	}
	nr := d.Count()
	if nc == 0 && nr > 0 {
		d.fail("%d rows without columns", nr)
	}
	for range nr {
		if d.err != nil {
			break
		}
		row := make([]any, nc)
		for i := range row {
			row[i] = decodeValue(d)
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

	Model  ModelConfig
	Tools  []ToolDecl
	Core   CoreConfig
	Runner RunnerConfig
	API    APIConfig
}

// ModelConfig selects the model.
type ModelConfig struct {
	Kind string // ModelOffline (default) or ModelOpenAI
	// WordDelay paces the offline model (host timers).
	WordDelay time.Duration
	// BaseURL and Name configure the OpenAI-compatible provider; its key
	// stays with the host, which adds it to every EgressModel request.
	BaseURL       string
	Name          string
	MaxRetryAfter time.Duration
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
}

// CoreConfig mirrors core.Config. Zero means default; ResumeBudget is a
// pointer because 0 is a meaningful budget.
type CoreConfig struct {
	ResumeBudget   *int
	MaxClaimAge    time.Duration
	WakeInterval   time.Duration
	InterruptGrace time.Duration
}

// RunnerConfig mirrors runner.Config. Zero means default.
type RunnerConfig struct {
	StepCap         int
	StreamIdle      time.Duration
	StepWall        time.Duration
	ToolTimeout     time.Duration
	OutputCap       int
	CheckpointEvery time.Duration
	CheckpointBytes int
	Retries         *int
	RetryInitial    time.Duration
	RetryMax        time.Duration
	ContextBytes    int
	SystemPrompt    string
}

// APIConfig configures the guest's API handler.
type APIConfig struct {
	// Tokens is a REVENANT_TOKENS spec; use the "sha256:" form so no token
	// enters the guest (a host that authenticates requests itself forwards
	// stand-ins instead of tokens: see host.HashTokens). Empty serves the
	// anonymous principal.
	Tokens    string
	Heartbeat time.Duration
	MaxBody   int64
	// Session defaults for POST /v1/sessions.
	SystemPrompt string
	ModelName    string
	Tools        *[]string
}

func encodeOptInt(e *Encoder, p *int) {
	e.Bool(p != nil)
	if p != nil {
		e.Varint(int64(*p))
	}
}

func decodeOptInt(d *Decoder) *int {
	if !d.Bool() {
		return nil
	}
	v := int(d.Varint())
	return &v
}

// Encode returns the wire form.
func (c BootConfig) Encode() []byte {
	var e Encoder
	e.Uvarint(uint64(c.HostMajor))
	e.Uvarint(uint64(c.HostMinor))
	e.String(c.TreeID)
	m := c.Model
	e.String(m.Kind)
	e.Varint(int64(m.WordDelay))
	e.String(m.BaseURL)
	e.String(m.Name)
	e.Varint(int64(m.MaxRetryAfter))
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
	k := c.Core
	encodeOptInt(&e, k.ResumeBudget)
	e.Varint(int64(k.MaxClaimAge))
	e.Varint(int64(k.WakeInterval))
	e.Varint(int64(k.InterruptGrace))
	r := c.Runner
	e.Varint(int64(r.StepCap))
	e.Varint(int64(r.StreamIdle))
	e.Varint(int64(r.StepWall))
	e.Varint(int64(r.ToolTimeout))
	e.Varint(int64(r.OutputCap))
	e.Varint(int64(r.CheckpointEvery))
	e.Varint(int64(r.CheckpointBytes))
	encodeOptInt(&e, r.Retries)
	e.Varint(int64(r.RetryInitial))
	e.Varint(int64(r.RetryMax))
	e.Varint(int64(r.ContextBytes))
	e.String(r.SystemPrompt)
	a := c.API
	e.String(a.Tokens)
	e.Varint(int64(a.Heartbeat))
	e.Varint(a.MaxBody)
	e.String(a.SystemPrompt)
	e.String(a.ModelName)
	e.Bool(a.Tools != nil)
	if a.Tools != nil {
		e.Uvarint(uint64(len(*a.Tools)))
		for _, t := range *a.Tools {
			e.String(t)
		}
	}
	return e.Bytes()
}

// DecodeBootConfig reads a BootConfig.
func DecodeBootConfig(b []byte) (BootConfig, error) {
	d := NewDecoder(b)
	var c BootConfig
	c.HostMajor = uint16(d.Uvarint())
	c.HostMinor = uint16(d.Uvarint())
	c.TreeID = d.String()
	c.Model = ModelConfig{Kind: d.String(), WordDelay: duration(d), BaseURL: d.String(), Name: d.String(), MaxRetryAfter: duration(d)}
	n := d.Count()
	for range n {
		c.Tools = append(c.Tools, ToolDecl{Kind: d.String(), Name: d.String(), Description: d.String(), Schema: d.Blob(),
			Idempotent: d.Bool(), Timeout: duration(d), OutputCap: int(d.Varint()), MaxBytes: d.Varint()})
	}
	c.Core = CoreConfig{ResumeBudget: decodeOptInt(d), MaxClaimAge: duration(d), WakeInterval: duration(d), InterruptGrace: duration(d)}
	c.Runner = RunnerConfig{StepCap: int(d.Varint()), StreamIdle: duration(d), StepWall: duration(d), ToolTimeout: duration(d),
		OutputCap: int(d.Varint()), CheckpointEvery: duration(d), CheckpointBytes: int(d.Varint()), Retries: decodeOptInt(d),
		RetryInitial: duration(d), RetryMax: duration(d), ContextBytes: int(d.Varint()), SystemPrompt: d.String()}
	c.API = APIConfig{Tokens: d.String(), Heartbeat: duration(d), MaxBody: d.Varint(), SystemPrompt: d.String(), ModelName: d.String()}
	if d.Bool() {
		m := d.Count()
		tools := make([]string, 0, m)
		for range m {
			tools = append(tools, d.String())
		}
		c.API.Tools = &tools
	}
	return c, d.Finish()
}
