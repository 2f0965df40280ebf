package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// CreateRequest is the body of POST /v1/sessions (optional).
type CreateRequest struct {
	Config json.RawMessage `json:"config,omitempty"`
}

// PromptRequest is the body of POST /v1/sessions/{id}/prompt.
type PromptRequest struct {
	Text string `json:"text"`
	ID   string `json:"id,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// Limits on request content. A session's config is stored in one event,
// and a Durable Object refuses a value over 2 MB, so besides each field's
// bound the config as a whole is bounded as it is stored (MaxStoredConfig).
const (
	MaxPromptIDLen    = 128
	MaxPromptText     = 256 << 10
	MaxSystemPrompt   = MaxPromptText // config.system_prompt, bytes
	MaxModelName      = 256           // config.model, bytes
	MaxConfigTools    = 256           // config.tools, names
	MaxConfigToolName = 64            // a name in config.tools, bytes (the tool-name rule's bound)
	// MaxStoredConfig bounds a session's config as stored: the bytes of
	// its JSON as session.created holds it, the server's defaults filled
	// in. The fields' own bounds do not bound their sum, and that JSON
	// writes each <, > and & in six bytes (\u003c), so a create within
	// every field's bound could reach 3.2 MB and be refused by a Durable
	// Object (2 MB a value) after doing work. 1600 KiB still takes any one
	// field at its bound, whatever its characters (a system_prompt of
	// 256 KiB of '<' is 1.5 MiB stored, as a prompt's text can be), and
	// leaves the event over 350 KB of room under 2 MB.
	MaxStoredConfig = 1600 << 10
)

// DecodeError is what the strict decoder found wrong with a request body:
// the kind of problem, which decides the answer's type, and the member it
// is about. Its text is the message the client reads.
type DecodeError struct {
	Problem DecodeProblem
	Field   string // the member's path ("text", "config.model"); "" for the body
	msg     string
}

func (e *DecodeError) Error() string { return e.msg }

// Type is the error type a body with this problem is answered with: a
// body that is not one well-formed JSON object is invalid_json, an object
// whose members are wrong is invalid_request.
func (e *DecodeError) Type() ErrorType {
	switch e.Problem {
	case ProblemUnknownField, ProblemWrongType:
		return ErrInvalidRequest
	}
	return ErrInvalidJSON
}

// Is matches the error's type (see Error.Is).
func (e *DecodeError) Is(target error) bool {
	t, ok := target.(ErrorType)
	return ok && t == e.Type()
}

// DecodeProblem is a kind of DecodeError.
type DecodeProblem int

// The problems the strict decoder reports.
const (
	ProblemEmpty         DecodeProblem = iota + 1 // no body where one is required
	ProblemSyntax                                 // not UTF-8, or not well-formed JSON
	ProblemNotObject                              // well-formed, but not an object (null, an array, ...)
	ProblemDuplicate                              // a member named twice in one object
	ProblemUnknownField                           // a member the object does not have (names are case-sensitive)
	ProblemWrongType                              // a member of the wrong JSON type
	ProblemTrailingData                           // more data after the object
	ProblemHalfSurrogate                          // a \u escape of half a UTF-16 surrogate pair
)

func decodeFail(p DecodeProblem, field, msg string) error {
	return &DecodeError{Problem: p, Field: field, msg: msg}
}

// decodeStrict reads exactly one JSON object into v, whose members are
// named exactly as in f (encoding/json alone would match them in any case
// and let the last of two equal names win). Empty bodies are allowed when
// emptyOK (v keeps its zero value); null is not an object.
func decodeStrict(body []byte, v any, f fields, emptyOK bool) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if emptyOK {
			return nil
		}
		return decodeFail(ProblemEmpty, "", "the request body is empty; a JSON object is required")
	}
	if !utf8.Valid(body) {
		return decodeFail(ProblemSyntax, "", "the request body is not valid UTF-8")
	}
	if json.Valid(body) {
		// Well-formed, so the walk below meets no syntax error and no
		// nesting deeper than encoding/json's limit. Malformed bodies get
		// the decoder's own message below.
		if trimmed[0] != '{' {
			return decodeFail(ProblemNotObject, "", "the request body must be a JSON object")
		}
		if at := HalfSurrogateAt(body); at >= 0 {
			return decodeFail(ProblemHalfSurrogate, "", "the request body's escape "+string(body[at:at+6])+" at byte "+strconv.Itoa(at)+" is half a UTF-16 surrogate pair, which is no character: send UTF-8 text")
		}
		// Numbers stay text (UseNumber): 1e999 is well-formed, and the
		// walk must not fail on a float64 it has no use for; where a
		// number does not belong the decode below says so.
		walk := json.NewDecoder(bytes.NewReader(body))
		walk.UseNumber()
		var unknown error
		if err := checkMembers(walk, f, "", &unknown); err != nil {
			return err
		}
		if unknown != nil {
			return unknown
		}
	}
	// Unknown members were refused by name above (a malformed body fails
	// on its syntax first), so the decoder need not look for them.
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field == "":
			return decodeFail(ProblemNotObject, "", "the request body must be a JSON object")
		case errors.As(err, &typeErr):
			return decodeFail(ProblemWrongType, typeErr.Field, fmt.Sprintf("field %q must be %s", core.Clip(typeErr.Field), jsonType(typeErr.Type.Kind().String())))
		}
		if trimmed[0] != '{' {
			// A form (text=hello) or plain text: the decoder's own words
			// ("invalid character 'e' in literal true") would not say that
			// the body is to be JSON at all.
			return decodeFail(ProblemSyntax, "", "the request body must be a JSON object, starting with {; it starts with "+strconv.Quote(core.Clip(string(trimmed[:min(len(trimmed), 16)]))))
		}
		return decodeFail(ProblemSyntax, "", "the request body is not a JSON object: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return decodeFail(ProblemTrailingData, "", "the request body has data after the JSON object")
	}
	return nil
}

// HalfSurrogateAt is the offset of the first \u escape in body, well-formed
// JSON, of half a UTF-16 surrogate pair (a high one, \ud800-\udbff, not
// followed at once by a low one, or a low one, \udc00-\udfff, alone), or
// -1. encoding/json reads one as U+FFFD without a word, as it would an
// invalid UTF-8 byte, which the decoder refuses: a prompt id "\ud800" and
// another "\udc00" were both stored as "\ufffd", so the second prompt was
// answered "duplicate": true and never admitted. The config file's check
// (config.CheckSyntax) uses it too: one scan for both.
func HalfSurrogateAt(body []byte) int {
	inString := false
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			inString = !inString
		case '\\':
			if !inString || body[i+1] != 'u' { // well-formed: an escape is complete
				i++
				break
			}
			unit := escapedUnit(body[i:])
			switch {
			case unit < 0xd800 || unit > 0xdfff:
			case unit < 0xdc00 && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' &&
				escapedUnit(body[i+6:]) >= 0xdc00 && escapedUnit(body[i+6:]) <= 0xdfff:
				i += 6 // the pair's low half
			default:
				return i
			}
			i += 5
		}
	}
	return -1
}

// escapedUnit is the UTF-16 code unit of the \uXXXX escape esc begins
// with (its four hex digits, which well-formed JSON guarantees).
func escapedUnit(esc []byte) uint64 {
	unit, _ := strconv.ParseUint(string(esc[2:6]), 16, 16)
	return unit
}

// fields names the members a request object may have, spelled exactly;
// each maps to the fields of its own value when that is an object checked
// the same way, or to nil (not checked by name).
type fields map[string]fields

// fieldsOf reads the json names of a struct type's fields, recursively
// for fields that are structs or lists of structs (each element checked
// against the struct's fields; config.permissions).
func fieldsOf(t reflect.Type) fields {
	f := fields{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		switch ft := sf.Type; {
		case ft.Kind() == reflect.Struct:
			f[name] = fieldsOf(ft)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			f[name] = fieldsOf(ft.Elem())
		default:
			f[name] = nil
		}
	}
	return f
}

// The members each request body may have. A create's config is raw JSON
// to the decoder, so its fields (core.SessionConfig's) are added here.
var (
	createFields = fields{"config": fieldsOf(reflect.TypeFor[core.SessionConfig]())}
	promptFields = fieldsOf(reflect.TypeFor[PromptRequest]())
	replyFields  = fieldsOf(reflect.TypeFor[ReplyRequest]())
)

// checkMembers walks the next JSON value of dec, which is well-formed:
// no object anywhere may name a member twice, and an object with fields
// (f not nil) may name only those, spelled exactly. at is the value's
// path for messages ("" for the body, "config"). A member named twice is
// returned at once; the first unknown member is kept in *unknown and the
// walk goes on, so a body that names a member twice is invalid_json
// whatever else is wrong with it ({"a":1,"a":1} is not one JSON object
// before it is an object with an unknown member).
func checkMembers(dec *json.Decoder, f fields, at string, unknown *error) error {
	tok, err := dec.Token()
	if err != nil {
		return decodeFail(ProblemSyntax, at, "the request body is not valid JSON")
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			name, ok := tok.(string)
			if err != nil || !ok {
				return decodeFail(ProblemSyntax, at, "the request body is not valid JSON")
			}
			if seen[name] {
				return decodeFail(ProblemDuplicate, join(at, name), fmt.Sprintf("%sfield %q is given twice; each field may be given once", prefix(at), core.Clip(name)))
			}
			seen[name] = true
			sub, known := f[name]
			if f != nil && !known && *unknown == nil {
				*unknown = decodeFail(ProblemUnknownField, join(at, name), fmt.Sprintf("%sunknown field %q%s", prefix(at), core.Clip(name), caseHint(f, name)))
			}
			if err := checkMembers(dec, sub, join(at, name), unknown); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if err := checkMembers(dec, f, at, unknown); err != nil { // f: a list's element fields
				return err
			}
		}
	default:
		return nil // a scalar
	}
	_, err = dec.Token() // the closing delimiter
	if err != nil {
		return decodeFail(ProblemSyntax, at, "the request body is not valid JSON")
	}
	return nil
}

// caseHint names the field a wrongly cased name was meant to be.
func caseHint(f fields, name string) string {
	for known := range f {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf(" (field names are case-sensitive: %q)", known)
		}
	}
	return ""
}

func prefix(at string) string {
	if at == "" {
		return ""
	}
	return at + ": "
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// DecodeCreate parses and validates a create body.
func DecodeCreate(body []byte) (CreateRequest, error) {
	var req CreateRequest
	if err := decodeStrict(body, &req, createFields, true); err != nil {
		return req, err
	}
	if len(req.Config) > 0 && !bytes.Equal(bytes.TrimSpace(req.Config), []byte("null")) {
		c, err := core.ParseSessionConfig(req.Config)
		if err != nil {
			return req, fail(ErrInvalidRequest, clientMessage(err))
		}
		if err := checkConfigLimits(c); err != nil {
			return req, err
		}
	} else {
		req.Config = nil
	}
	return req, nil
}

// checkConfigLimits bounds what a create may store in its config (the
// stored config is parsed without them, so no session already created
// stops working).
func checkConfigLimits(c core.SessionConfig) error {
	switch {
	case len(c.SystemPrompt) > MaxSystemPrompt:
		return fail(ErrPayloadTooLarge, fmt.Sprintf("config.system_prompt is longer than %d bytes", MaxSystemPrompt))
	case len(c.Model) > MaxModelName:
		return fail(ErrInvalidRequest, fmt.Sprintf("config.model is longer than %d bytes", MaxModelName))
	case c.Tools != nil && len(*c.Tools) > MaxConfigTools:
		return fail(ErrInvalidRequest, fmt.Sprintf("config.tools names more than %d tools", MaxConfigTools))
	}
	if c.Tools != nil {
		for i, name := range *c.Tools {
			if name == "" || len(name) > MaxConfigToolName {
				return fail(ErrInvalidRequest, fmt.Sprintf("config.tools[%d] must be a tool name of 1 to %d bytes", i, MaxConfigToolName))
			}
		}
	}
	stored, err := json.Marshal(c)
	if err != nil {
		return fail(ErrInvalidRequest, "config cannot be stored: "+err.Error())
	}
	return checkStoredConfig(stored, "config")
}

// checkStoredConfig refuses a config whose stored JSON is over
// MaxStoredConfig (payload_too_large); what names the config in the message.
func checkStoredConfig(stored []byte, what string) error {
	if len(stored) <= MaxStoredConfig {
		return nil
	}
	return fail(ErrPayloadTooLarge, fmt.Sprintf("%s is %d bytes as stored, over the limit of %d bytes (1600 KiB); the stored JSON writes each <, > and & in six bytes",
		what, len(stored), MaxStoredConfig))
}

// DecodePrompt parses and validates a prompt body.
func DecodePrompt(body []byte) (PromptRequest, error) {
	var req PromptRequest
	if err := decodeStrict(body, &req, promptFields, false); err != nil {
		return req, err
	}
	switch {
	case strings.TrimSpace(req.Text) == "":
		return req, fail(ErrInvalidRequest, "text must not be empty")
	case len(req.Text) > MaxPromptText:
		return req, fail(ErrPayloadTooLarge, fmt.Sprintf("text is longer than %d bytes", MaxPromptText))
	case len(req.ID) > MaxPromptIDLen:
		return req, fail(ErrInvalidRequest, fmt.Sprintf("id is longer than %d bytes", MaxPromptIDLen))
	case req.Mode != "" && req.Mode != event.ModeQueue && req.Mode != event.ModeReplace:
		return req, fail(ErrInvalidRequest, `mode must be "queue" or "replace"`)
	}
	return req, nil
}

// ReplyRequest is the body of a permission or question reply.
type ReplyRequest struct {
	Reply      string            `json:"reply,omitempty"`
	Answers    []json.RawMessage `json:"answers,omitempty"`
	Cancel     bool              `json:"cancel,omitempty"`
	Message    string            `json:"message,omitempty"`
	ResponseID string            `json:"response_id"`
}

// DecodeReply parses a reply body; kind is "permission" or "question".
func DecodeReply(body []byte, kind string) (ReplyRequest, error) {
	var req ReplyRequest
	if err := decodeStrict(body, &req, replyFields, false); err != nil {
		return req, err
	}
	if strings.TrimSpace(req.ResponseID) == "" {
		return req, fail(ErrInvalidRequest, "response_id is required")
	}
	if kind == "permission" {
		switch req.Reply {
		case "once", "always", "reject":
		default:
			return req, fail(ErrInvalidRequest, `reply must be "once", "always" or "reject"`)
		}
		if req.Answers != nil || req.Cancel {
			return req, fail(ErrInvalidRequest, "a permission reply takes reply and message only")
		}
	} else {
		if req.Reply != "" {
			return req, fail(ErrInvalidRequest, "a question reply takes answers or cancel, not reply")
		}
		if (req.Answers == nil) == !req.Cancel {
			return req, fail(ErrInvalidRequest, "give either answers or cancel: true")
		}
	}
	return req, nil
}

// readBody reads at most limit bytes; more is payload_too_large. A
// declared length over limit is refused unread, at once, as the
// Cloudflare front does (worker.Front.Decide): a client that declares more
// than it sends would otherwise hold the request until the server's read
// timeout.
//
// A body sent compressed (a Content-Encoding other than identity) is
// refused before it is read, saying so: read as it comes, it would be
// refused as "not valid UTF-8", which sends its client looking in the
// wrong place. The declared length is judged first: the guest's host
// (Directory.CheckBodyUnread) and the Cloudflare front refuse a declared
// length over limit before anything else about the body, so a compressed
// body declared over it is 413 on every host, not 400 here.
func readBody(r *httpmsg.Request, limit int64) ([]byte, error) {
	if err := checkBodyUnread(r, limit); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fail(ErrInvalidRequest, "could not read the request body")
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(limit)
	}
	return body, nil
}

// checkBodyUnread is what readBody refuses before it reads a byte: a
// declared length over limit (413), then a compressed body (400).
func checkBodyUnread(r *httpmsg.Request, limit int64) error {
	if r.ContentLength > limit {
		return tooLarge(limit)
	}
	return CheckBodyEncoding(r)
}

// CheckBodyEncoding refuses a request whose body is sent compressed (a
// Content-Encoding other than identity): readBody's check after the
// declared length, and the Cloudflare front's for a create, whose body it
// checks itself. Every coding the request names counts, in every
// Content-Encoding header it sends: two headers are one list (RFC 9110
// §5.3), which is how the Cloudflare front sees them (workerd joins them),
// so "identity" then "gzip" is as compressed as "identity, gzip".
func CheckBodyEncoding(r *httpmsg.Request) error {
	for _, value := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(value, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return fail(ErrInvalidRequest, "the request body has a Content-Encoding: send it uncompressed (JSON in UTF-8)")
			}
		}
	}
	return nil
}

func tooLarge(limit int64) error {
	return fail(ErrPayloadTooLarge, fmt.Sprintf("the request body is larger than %d bytes", limit))
}

// jsonType names a Go kind the way a JSON client thinks of it.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "a number"
}
