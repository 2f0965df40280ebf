package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Event types, as the API spells them (black box: no import of core).
const (
	typeCreated     = "session.created@1"
	typeAdmitted    = "session.prompt.admitted@1"
	typeCancelled   = "session.prompt.cancelled@1"
	typeMessage     = "session.message.added@1"
	typeStarted     = "session.execution.started@1"
	typeResumed     = "session.execution.resumed@1"
	typeSucceeded   = "session.execution.succeeded@1"
	typeFailed      = "session.execution.failed@1"
	typeInterrupted = "session.execution.interrupted@1"
	typeStepStarted = "session.step.started@1"
	typeStepDone    = "session.step.completed@1"
	typeStepCut     = "session.step.cut@1"
	typeCheckpoint  = "session.text.checkpoint@1"
	typeToolSettled = "session.tool.settled@1"
	typeDelta       = "session.text.delta@1"
)

// ev is one event as the API sends it, with the payload fields the checks
// read decoded into P.
type ev struct {
	ID        string          `json:"id"`
	SessionID string          `json:"session_id"`
	Seq       int64           `json:"seq"`
	Type      string          `json:"type"`
	At        int64           `json:"at"`
	Data      json.RawMessage `json:"data"`
	P         payload         `json:"-"`
}

type payload struct {
	PromptID    string `json:"prompt_id"`
	ClientID    string `json:"client_id"`
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	CallID      string `json:"call_id"`
	Reason      string `json:"reason"`
	Cause       string `json:"cause"`
	TurnStart   bool   `json:"turn_start"`
	Attempt     int    `json:"attempt"`
	Index       int    `json:"index"`
	Kind        string `json:"type"` // failure type
	Message     string `json:"message"`
	Text        string `json:"text"`
	Offset      int    `json:"offset"`
	Role        string `json:"role"`
	Finish      string `json:"finish"`
	Mode        string `json:"mode"`
	ToolCalls   []struct {
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"tool_calls"`
}

// terminal reports whether e ends a turn: succeeded, failed, or an
// interrupt for any reason but shutdown.
func (e ev) terminal() bool {
	switch e.Type {
	case typeSucceeded, typeFailed:
		return true
	case typeInterrupted:
		return e.P.Reason != "shutdown"
	}
	return false
}

func (e ev) String() string {
	s := fmt.Sprintf("#%d %s", e.Seq, e.Type)
	if e.P.PromptID != "" {
		s += " prompt=" + e.P.PromptID
	}
	for _, kv := range [][2]string{{"reason", e.P.Reason}, {"cause", e.P.Cause}, {"type", e.P.Kind}} {
		if kv[1] != "" {
			s += " " + kv[0] + "=" + kv[1]
		}
	}
	if e.Type == typeResumed {
		s += " attempt=" + strconv.Itoa(e.P.Attempt)
	}
	return s
}

func describe(evs []ev) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("\n  ")
		b.WriteString(e.String())
	}
	return b.String()
}

// do sends one JSON request and decodes the answer into out; it requires
// the wanted status.
func (s *server) do(method, path string, body any, want int, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	require.NoError(s.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	require.NoError(s.t, err, "%s %s", method, path)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err, "%s %s: read the answer", method, path)
	require.Equal(s.t, want, resp.StatusCode, "%s %s answered %s", method, path, raw)
	if out != nil {
		require.NoError(s.t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
}

// create makes a session with the default configuration.
func (s *server) create() string {
	s.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{}, http.StatusCreated, &out)
	require.NotEmpty(s.t, out.ID)
	return out.ID
}

// createKeyed sends a create with body under an Idempotency-Key,
// requires the wanted status and returns the answer's id (a 201's).
func (s *server) createKeyed(key, body string, want int) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/sessions", strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := s.client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	require.Equal(s.t, want, resp.StatusCode, "create with key %q answered %s", key, raw)
	var out struct {
		ID string `json:"id"`
	}
	if want == http.StatusCreated {
		require.NoError(s.t, json.Unmarshal(raw, &out), "%s", raw)
		require.NotEmpty(s.t, out.ID)
	}
	return out.ID
}

// promptReq is the body of POST /v1/sessions/{id}/prompt.
type promptReq struct {
	Text string `json:"text"`
	ID   string `json:"id,omitempty"`
	Mode string `json:"mode,omitempty"`
}

type admission struct {
	PromptID  string `json:"prompt_id"`
	Duplicate bool   `json:"duplicate"`
}

// try posts a prompt without failing the test, for use off the test's
// goroutine: err is a transport error (the server died) or an answer other
// than 202.
func (s *server) try(sid string, p promptReq) (admission, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return admission{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/sessions/"+sid+"/prompt", bytes.NewReader(b))
	if err != nil {
		return admission{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return admission{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return admission{}, err
	}
	if resp.StatusCode != http.StatusAccepted {
		return admission{}, &statusError{code: resp.StatusCode, body: string(raw)}
	}
	var a admission
	if err := json.Unmarshal(raw, &a); err != nil || a.PromptID == "" {
		return admission{}, fmt.Errorf("202 with a body that is not an admission: %s", raw)
	}
	return a, nil
}

// statusError is an HTTP answer with an unexpected status.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.code, e.body) }

// send posts a prompt and requires its 202.
func (s *server) send(sid string, p promptReq) admission {
	s.t.Helper()
	var a admission
	s.do("POST", "/v1/sessions/"+sid+"/prompt", p, http.StatusAccepted, &a)
	require.NotEmpty(s.t, a.PromptID)
	return a
}

// prompt queues text without a client id and returns the prompt id.
func (s *server) prompt(sid, text string) string {
	s.t.Helper()
	return s.send(sid, promptReq{Text: text}).PromptID
}

// interrupt interrupts the session's turn; the 200 comes after the commit.
func (s *server) interrupt(sid string) bool {
	s.t.Helper()
	var out struct {
		Interrupted bool `json:"interrupted"`
	}
	s.do("POST", "/v1/sessions/"+sid+"/interrupt", nil, http.StatusOK, &out)
	return out.Interrupted
}

// snap is the part of the snapshot the tests read.
type snap struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Turns  int    `json:"turns"`
	Cursor int64  `json:"cursor"`
	Claim  *struct {
		ExecutionID    string `json:"execution_id"`
		ResumeAttempts int    `json:"resume_attempts"`
	} `json:"claim"`
	Prompts []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"prompts"`
	Messages []struct {
		Seq      int64  `json:"seq"`
		PromptID string `json:"prompt_id"`
		Role     string `json:"role"`
		Text     string `json:"text"`
	} `json:"messages"`
}

func (s *server) snapshot(sid string) snap {
	s.t.Helper()
	var out snap
	s.do("GET", "/v1/sessions/"+sid+"?limit=500", nil, http.StatusOK, &out)
	return out
}

// stream is one open SSE connection to a session's events.
type stream struct {
	s      *server
	what   string
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	last   int64 // seq of the last durable event read
	log    []ev  // durable events read, in order
	deltas int   // ephemeral frames read
}

// follow opens the session's event stream after seq after (?after=).
func (s *server) follow(sid string, after int64) *stream {
	s.t.Helper()
	return s.open(sid, after, fmt.Sprintf("?after=%d", after), "")
}

// resumeStream reopens the session's event stream the way a reconnecting
// EventSource does: with Last-Event-ID and no query.
func (s *server) resumeStream(sid string, lastEventID int64) *stream {
	s.t.Helper()
	return s.open(sid, lastEventID, "", strconv.FormatInt(lastEventID, 10))
}

func (s *server) open(sid string, after int64, query, lastEventID string) *stream {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/sessions/"+sid+"/events"+query, nil)
	require.NoError(s.t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		require.NoError(s.t, err, "open the event stream")
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		s.t.Fatalf("event stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	st := &stream{s: s, body: resp.Body, r: bufio.NewReader(resp.Body), cancel: cancel, last: after}
	s.t.Cleanup(st.close)
	return st
}

func (st *stream) close() {
	st.cancel()
	st.body.Close()
}

// next reads one frame and checks it against the SSE format: durable
// events carry `id: <seq>` equal to their seq, contiguous on the stream;
// deltas carry no id; `event:` is the type.
func (st *stream) next() (ev, error) {
	var id, typ string
	var hasID bool
	var data []string
	fields := false
	for {
		line, err := st.r.ReadString('\n')
		if err != nil {
			return ev{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if !fields {
				continue
			}
			break
		}
		if strings.HasPrefix(line, ":") {
			continue // heartbeat or comment
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields = true
		switch field {
		case "id":
			id, hasID = value, true
		case "event":
			typ = value
		case "data":
			data = append(data, value)
		}
	}
	var e ev
	raw := strings.Join(data, "\n")
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return ev{}, fmt.Errorf("frame data is not an event: %w: %s", err, raw)
	}
	if err := json.Unmarshal(e.Data, &e.P); err != nil {
		return ev{}, fmt.Errorf("event payload: %w: %s", err, raw)
	}
	if typ != e.Type {
		return ev{}, fmt.Errorf("frame event %q but data type %q", typ, e.Type)
	}
	if !hasID {
		if e.Seq != 0 || e.Type != typeDelta {
			return ev{}, fmt.Errorf("frame without id is not an ephemeral delta: %s", raw)
		}
		st.deltas++
		return e, nil
	}
	if id != strconv.FormatInt(e.Seq, 10) {
		return ev{}, fmt.Errorf("frame id %q but seq %d", id, e.Seq)
	}
	if e.Seq != st.last+1 {
		return ev{}, fmt.Errorf("stream jumped from seq %d to %d", st.last, e.Seq)
	}
	st.last = e.Seq
	st.log = append(st.log, e)
	return e, nil
}

// until reads frames until cond holds for one and returns that frame; it
// fails the test if the stream ends or the wait times out first.
func (st *stream) until(what string, cond func(ev) bool) ev {
	st.s.t.Helper()
	for {
		e, err := st.next()
		if err != nil {
			st.s.t.Fatalf("waiting for %s: %v; durable events so far:%s", what, err, describe(st.log))
		}
		if cond(e) {
			return e
		}
	}
}

// Conditions for until.
func isType(typ string) func(ev) bool { return func(e ev) bool { return e.Type == typ } }

func forPrompt(typ, promptID string) func(ev) bool {
	return func(e ev) bool { return e.Type == typ && e.P.PromptID == promptID }
}

func endOf(promptID string) func(ev) bool {
	return func(e ev) bool {
		return e.P.PromptID == promptID && (e.terminal() || e.Type == typeCancelled)
	}
}

// readLog reads the session's whole durable log from seq 0 up to the
// snapshot's cursor.
func (s *server) readLog(sid string, cursor int64) []ev {
	s.t.Helper()
	st := s.follow(sid, 0)
	defer st.close()
	for st.last < cursor {
		st.until(fmt.Sprintf("seq %d", cursor), func(e ev) bool { return e.Seq == cursor })
	}
	return st.log
}

// sleepingTurn starts a server over a new data directory, creates a session,
// prompts it with text (a /sleep turn) and returns once the turn's step has
// started, with the stream open at that point.
func sleepingTurn(t *testing.T, text string) (s *server, sid, promptID string, st *stream) {
	t.Helper()
	s = start(t, t.TempDir())
	sid = s.create()
	st = s.follow(sid, 0)
	promptID = s.prompt(sid, text)
	st.until("the sleeping step", forPrompt(typeStepStarted, promptID))
	return s, sid, promptID, st
}

// listed is the ids of GET /v1/sessions (the first page).
func (s *server) listed() []string {
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	s.do("GET", "/v1/sessions", nil, http.StatusOK, &list)
	var ids []string
	for _, x := range list.Sessions {
		ids = append(ids, x.ID)
	}
	return ids
}

// nDeltas is a stream condition: n text deltas seen.
func nDeltas(n int) func(ev) bool {
	seen := 0
	return func(e ev) bool {
		if e.Type == typeDelta {
			seen++
		}
		return seen >= n
	}
}
