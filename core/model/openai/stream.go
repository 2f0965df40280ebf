package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/revenantrt/revenant/core/model"
)

const (
	// maxEvent caps one server-sent event's data (its data lines joined)
	// and each line of the body as it came: more than this is refused. A
	// whole tool call may come in one event, so this is generous.
	maxEvent = 8 << 20
	// maxCompletion caps a non-streamed JSON answer.
	maxCompletion = 16 << 20
)

// errClosed is returned by Recv after Close.
var errClosed = errors.New("openai: stream closed")

// errNoChoice ends an answer that held no choice at all: no text, no tool
// call, not even a finish reason ({"choices":[]}, or [DONE] alone). Taken
// as complete, it would end the turn with an empty reply as if the model
// had said nothing on purpose; it is a broken provider or proxy, whose
// same request gets the same, so it is not retried.
var errNoChoice = &model.Error{Msg: "the provider's answer held no choice (no text, no tool call, no finish reason): is the base URL an OpenAI-compatible API?"}

// stream reads server-sent events from a chat completions response. Recv
// is called by one goroutine at a time; Close may be called from any.
type stream struct {
	ctx    context.Context // the request's: when it ends, the body read fails
	body   io.ReadCloser
	events *eventReader
	redact func(string) string

	pending  []model.Chunk // decoded from the last event, not yet returned
	done     bool          // [DONE] seen: io.EOF once pending is empty
	finished bool          // a finish reason seen: the answer is complete
	// sawChoice is set by the first choice (index 0) read: an answer that
	// ends with none said nothing at all, not even why it stopped.
	sawChoice bool
	order     callOrder
	err       error // returned by every Recv once set

	// mediaType is the answer's declared type; sawEvent is set by the
	// first data event. Together they tell a cut stream from an answer
	// that was never one (see readError).
	mediaType string
	sawEvent  bool

	closed    atomic.Bool
	closeBody sync.Once
}

func newStream(ctx context.Context, body io.ReadCloser, mediaType string, redact func(string) string) *stream {
	return &stream{ctx: ctx, body: body, events: newEventReader(body), redact: redact, order: callOrder{last: -1}, mediaType: mediaType}
}

// Recv implements model.Stream. It returns ctx's error promptly when ctx
// ends (closing the body to unblock the read), errClosed after Close, and
// io.EOF after [DONE]. Every error is final: later calls return it again.
func (s *stream) Recv(ctx context.Context) (model.Chunk, error) {
	if s.err != nil {
		return model.Chunk{}, s.err
	}
	if s.closed.Load() {
		return s.fail(errClosed)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(err)
	}
	for len(s.pending) == 0 {
		if s.done {
			if !s.sawChoice {
				return s.fail(errNoChoice)
			}
			return s.fail(io.EOF)
		}
		stop := context.AfterFunc(ctx, s.shut)
		data, err := s.events.next()
		if !stop() {
			// ctx ended during the read and the body is (being) closed.
			return s.fail(ctx.Err())
		}
		if err != nil {
			return s.fail(s.readError(ctx, err))
		}
		s.sawEvent = true
		if err := s.handle(data); err != nil {
			return s.fail(err)
		}
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	return c, nil
}

func (s *stream) fail(err error) (model.Chunk, error) {
	s.err = err
	s.pending = nil
	if !errors.Is(err, io.EOF) {
		s.shut()
	}
	return model.Chunk{}, err
}

// readError classifies a failed body read.
func (s *stream) readError(ctx context.Context, err error) error {
	switch {
	case s.closed.Load():
		return errClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case s.ctx.Err() != nil:
		return s.ctx.Err()
	case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && s.finished:
		// No [DONE], but the answer was complete: only usage may be lost.
		return io.EOF
	case errors.Is(err, io.EOF) && !s.sawEvent && s.mediaType != "" && s.mediaType != "text/event-stream":
		// A whole answer of another declared type (an HTML page from a
		// base URL that is a website, a proxy's notice) with no event in
		// it: no stream was cut, and asking again gets the same page.
		return &model.Error{Msg: fmt.Sprintf("the provider answered 200 with Content-Type %q and no server-sent events: is the base URL an OpenAI-compatible API?", s.mediaType)}
	case errors.Is(err, io.EOF):
		return &model.Error{Retryable: true, Msg: "the stream was cut before [DONE]"}
	case errors.Is(err, errEventTooLarge):
		return &model.Error{Msg: err.Error()}
	default:
		return transportError("the stream was cut", err, s.redact)
	}
}

// Close implements model.Stream: it closes the body, so a Recv waiting in
// another goroutine returns errClosed.
func (s *stream) Close() error {
	s.closed.Store(true)
	s.shut()
	return nil
}

func (s *stream) shut() {
	s.closeBody.Do(func() { s.body.Close() })
}

// handle decodes one event's data into pending chunks.
func (s *stream) handle(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.done = true
		return nil
	}
	if len(data) == 0 {
		return nil
	}
	if text, ok := textDelta(data); ok {
		s.sawChoice = true
		if text != "" {
			s.pending = append(s.pending, model.Chunk{Text: text})
		}
		return nil
	}
	return s.decode(data)
}

// decode decodes one event's data in full into pending chunks.
func (s *stream) decode(data []byte) error {
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return &model.Error{Msg: s.redact("decode stream event: " + err.Error())}
	}
	if obj, ok := parseError(p.Error); ok {
		return streamError(obj, s.redact)
	}
	s.pending = append(s.pending, s.chunks(p, false)...)
	return nil
}

// The chunk shapes read from the provider. A streamed chunk carries
// choices[].delta; a non-streamed completion carries choices[].message.
type (
	payload struct {
		Choices []choice        `json:"choices"`
		Usage   *usage          `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	choice struct {
		Index        int      `json:"index"`
		Delta        message  `json:"delta"`
		Message      *message `json:"message"`
		FinishReason *string  `json:"finish_reason"`
	}
	message struct {
		Content   json.RawMessage `json:"content"`
		ToolCalls []toolCall      `json:"tool_calls"`
	}
	toolCall struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
)

// chunks turns a payload into chunks: the text, one chunk per tool-call
// delta, then the finish reason and usage. Only the first choice counts.
// whole says tool calls are complete (a non-streamed answer), so one
// without an index takes its position.
func (s *stream) chunks(p payload, whole bool) []model.Chunk {
	var out []model.Chunk
	var finish string
	for _, c := range p.Choices {
		if c.Index != 0 {
			continue
		}
		s.sawChoice = true
		msg := c.Delta
		if c.Message != nil {
			msg = *c.Message
		}
		if text := contentText(msg.Content); text != "" {
			out = append(out, model.Chunk{Text: text})
		}
		for i, tc := range msg.ToolCalls {
			if whole && tc.Index == nil {
				tc.Index = &i
			}
			out = append(out, model.Chunk{ToolCall: &model.ToolCallDelta{
				Index:     s.order.place(tc),
				ID:        tc.ID,
				Name:      tc.Function.Name,
				Arguments: argumentsText(tc.Function.Arguments),
			}})
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			finish = *c.FinishReason
			s.finished = true
		}
	}
	if finish != "" || p.Usage != nil {
		c := model.Chunk{Finish: finish}
		if p.Usage != nil {
			c.Usage = &model.Usage{InputTokens: p.Usage.PromptTokens, OutputTokens: p.Usage.CompletionTokens}
		}
		out = append(out, c)
	}
	return out
}

// contentText reads message content: a string (the norm), null, or an
// array of parts whose text parts are joined.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var b bytes.Buffer
		for _, p := range parts {
			if p.Type == "" || p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// argumentsText reads a tool call's arguments: a string fragment (the
// norm) or, from some servers, the arguments as a JSON value.
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	return string(raw)
}

// callOrder places tool-call deltas: by their index when they have one,
// otherwise by order of appearance (see the package documentation).
type callOrder struct {
	next      int    // one past the highest index seen
	last      int    // index of the latest call, -1 before the first
	lastID    string // the latest call's provider id, if any
	lastNamed bool   // whether the latest call has a name
}

func (o *callOrder) place(tc toolCall) int {
	var i int
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case o.last < 0,
		tc.ID != "" && tc.ID != o.lastID,
		tc.ID == "" && tc.Function.Name != "" && o.lastNamed:
		i = o.next
	default:
		i = o.last
	}
	if i != o.last {
		o.last, o.lastID, o.lastNamed = i, "", false
	}
	if tc.ID != "" {
		o.lastID = tc.ID
	}
	if tc.Function.Name != "" {
		o.lastNamed = true
	}
	o.next = max(o.next, i+1)
	return i
}

// completion reads a non-streamed JSON answer (from a server that ignored
// "stream": true) and returns it as a finished stream.
func (m *Model) completion(ctx context.Context, body io.Reader) (model.Stream, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxCompletion+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transportError("read answer", err, m.redact)
	}
	if len(data) > maxCompletion {
		return nil, &model.Error{Msg: fmt.Sprintf("the answer exceeds %d bytes", maxCompletion)}
	}
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, &model.Error{Msg: m.redact("decode answer: " + err.Error())}
	}
	if obj, ok := parseError(p.Error); ok {
		return nil, streamError(obj, m.redact)
	}
	s := newStream(ctx, io.NopCloser(bytes.NewReader(nil)), "application/json", m.redact)
	s.pending = s.chunks(p, true)
	s.done = true
	return s, nil
}

var errEventTooLarge = errors.New("a stream event exceeds " + strconv.Itoa(maxEvent) + " bytes")

// eventReader splits a body into server-sent events and returns their
// data. Comments and fields other than data are skipped; the data lines
// of one event are joined with newlines.
type eventReader struct {
	r *bufio.Reader
}

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// next returns the data of the next event that has some. At the end of
// the body it returns io.EOF, after dispatching a last event not followed
// by a blank line if its data is complete ([DONE] or a JSON value); an
// incomplete one is dropped, as a cut.
func (e *eventReader) next() ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := e.line()
		if err != nil {
			if errors.Is(err, io.EOF) && has && (string(bytes.TrimSpace(data)) == "[DONE]" || json.Valid(data)) {
				return data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment, such as OpenRouter's keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		joined := len(data) + len(value)
		if has {
			joined++ // the newline that joins this line to the last
		}
		if joined > maxEvent {
			return nil, errEventTooLarge
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
	}
}

// line reads one line without its line ending (LF or CRLF). A last line
// without an ending is returned as a line; io.EOF comes on the next call.
func (e *eventReader) line() ([]byte, error) {
	var line []byte
	for {
		part, err := e.r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxEvent {
			return nil, errEventTooLarge
		}
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			// The body ended mid-line: take the line, EOF comes next.
			return bytes.TrimSuffix(line, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}
