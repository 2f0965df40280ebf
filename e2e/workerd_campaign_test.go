package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Durable Object host on local workerd with an OpenAI-compatible fake
// provider on loopback (in this process), SIGKILLed at points of
// tool-calling turns, plus an eviction (ctx.abort through a test-only
// route) and a Go panic. The object is built with the revenant_testroutes
// tag. Serial, like TestWorkerdSIGKILL.

// scriptedModel answers by the conversation's last message: a user
// message gets a kv_put tool call (at once); a tool result gets a text
// answer of wordCount words streamed one per wordDelay. It records every
// request by the turn's first user text, and the last role.
type scriptedModel struct {
	wordDelay time.Duration

	mu   sync.Mutex
	reqs []modelReq
}

type modelReq struct {
	prompt   string // the last user message
	lastRole string
	prefix   string // assistant text the request continues, if any
}

const wordCount = 24

func answerWords() []string {
	out := make([]string, wordCount)
	for i := range out {
		out[i] = fmt.Sprintf("w%02d", i)
	}
	return out
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	rec := modelReq{lastRole: req.Messages[len(req.Messages)-1].Role}
	toolSeen := false
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			rec.prompt = fmt.Sprint(msg.Content)
		case "tool":
			toolSeen, rec.prefix = true, ""
		case "assistant":
			if s, ok := msg.Content.(string); ok && toolSeen {
				rec.prefix = s // a resumed step continues the kept text
			}
		}
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(chunk string) {
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		flusher.Flush()
	}
	if toolSeen {
		for _, word := range answerWords() {
			if strings.Contains(rec.prefix, word) {
				continue
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(m.wordDelay): // paces the stream (the fake provider's behaviour, not a wait for a condition)
			}
			send(`{"choices":[{"index":0,"delta":{"content":` + quote(word+" ") + `}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	} else {
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"kv_put","arguments":"{\"key\":\"k\",\"value\":\"v\"}"}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	}
	send("[DONE]")
}

// requests counts the requests of prompt whose last message had role.
func (m *scriptedModel) requests(prompt, role string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.reqs {
		if strings.Contains(r.prompt, prompt) && r.lastRole == role {
			n++
		}
	}
	return n
}

func startWorkerdProvider(t *testing.T) (*workerd, *scriptedModel) {
	m := &scriptedModel{wordDelay: 120 * time.Millisecond}
	provider := httptest.NewServer(m) // loopback
	t.Cleanup(provider.Close)
	w := startWorkerdWith(t, "revenant_testroutes",
		"OPENAI_BASE_URL:"+provider.URL+"/v1", "REVENANT_MODEL:fake-model", "OPENAI_API_KEY:sk-test-never-logged")
	return w, m
}

// TestWorkerdToolTurnKills: WORKERD_KILL_ROUNDS rounds (make e2e-workerd:
// 3) of four kills at points of a tool-calling turn with the provider.
func TestWorkerdToolTurnKills(t *testing.T) {
	w, m := startWorkerdProvider(t)
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("WORKERD_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	scenarios := []struct {
		name string
		run  func(*testing.T, *workerd, *scriptedModel, string)
	}{
		{"mid stream after partial text", toolKillMidStream},
		{"after the tool call settled", toolKillAfterTool},
		{"after an interrupt", toolKillAfterInterrupt},
		{"while prompts wait", toolKillQueued},
	}
	for r := range rounds {
		for i, sc := range scenarios {
			tag := fmt.Sprintf("turn-%d-%d", r, i)
			if !t.Run(fmt.Sprintf("%s/%d", sc.name, r), func(t *testing.T) { sc.run(t, w, m, tag) }) {
				t.Logf("model requests: %+v", m.reqs)
				return
			}
		}
	}
	assert.NotContains(t, w.logs.String(), "sk-test-never-logged", "the key never reaches the logs")
}

// toolTurn prompts text and follows it until cond.
func toolTurn(t *testing.T, w *workerd, text string, what string, cond func(ev) bool) (*server, string, string) {
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, text)
	st.until(what, cond)
	st.close()
	return s, sid, a
}

func nDeltas(n int) func(ev) bool {
	seen := 0
	return func(e ev) bool {
		if e.Type == typeDelta {
			seen++
		}
		return seen >= n
	}
}

// toolKillMidStream: killed while the answer after the tool streams, past
// a checkpoint. The tool step is not requested again, the tool ran once,
// the checkpointed text is kept, the turn ends once.
func toolKillMidStream(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s, sid, a := toolTurn(t, w, tag, "ten words of the answer", nDeltas(10))
	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
	assert.Equal(t, 1, m.requests(tag, "user"), "the recorded tool-call step is not requested again")
	assert.Equal(t, 1, countType(sum.log, typeToolSettled), "the tool ran once")
	require.GreaterOrEqual(t, len(ta.steps), 2, "the tool step and the answer's:%s", describe(sum.log))
	kept := ""
	for _, e := range sum.log {
		if e.Type == typeCheckpoint && e.P.StepID == ta.steps[1].P.StepID {
			kept += e.P.Text
		}
	}
	assert.NotEmpty(t, kept, "the streamed partial text was checkpointed and kept:%s", describe(sum.log))
	assert.True(t, strings.HasPrefix(strings.Join(answerWords(), " "), strings.TrimSpace(kept)), "kept text %q is the answer's prefix", kept)
}

// toolKillAfterTool: killed after the tool call settled, before the answer
// streamed much.
func toolKillAfterTool(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s, sid, a := toolTurn(t, w, tag, "the tool's settlement", isType(typeToolSettled))
	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once:%s", describe(sum.log))
	assert.Equal(t, 1, m.requests(tag, "user"), "the tool-call step is not requested again")
	assert.Equal(t, 1, countType(sum.log, typeToolSettled), "the tool ran once")
	last := ta.done[len(ta.done)-1]
	assert.True(t, strings.HasSuffix(last.P.Text, "w23 "), "the answer completed: %q", last.P.Text)
}

// toolKillAfterInterrupt: the user interrupted the streaming answer; the
// kill comes after the interrupt's 200. The turn never resumes, the model
// is not asked again.
func toolKillAfterInterrupt(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s, sid, a := toolTurn(t, w, tag, "three words of the answer", nDeltas(3))
	require.True(t, s.interrupt(sid))
	before := m.requests(tag, "tool")
	w.restart(t)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeInterrupted, "user")
	require.Empty(t, ta.resumes, "an interrupted turn never resumes:%s", describe(sum.log))
	assert.Equal(t, before, m.requests(tag, "tool"), "nothing asked the model after the restart")
}

// toolKillQueued: two prompts wait behind a streaming turn at the kill;
// every acknowledged prompt runs, each turn ends once.
func toolKillQueued(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, tag+"-a")
	b := s.prompt(sid, tag+"-b")
	c := s.prompt(sid, tag+"-c")
	st.until("five words of the first answer", nDeltas(5))
	st.close()
	w.restart(t)
	w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)

	for _, p := range []string{a, b, c} {
		sum := s.settle(sid, p)
		sum.requireEnd(t, p, typeSucceeded, "")
	}
	for _, p := range []string{"-a", "-b", "-c"} {
		assert.Equal(t, 1, m.requests(tag+p, "user"), "prompt %s's tool-call step asked once", p)
	}
}

func countType(log []ev, typ string) int {
	n := 0
	for _, e := range log {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestWorkerdEvictAndPanic: an object evicted mid-turn (ctx.abort through
// the test route) resumes the turn from its alarm with no client request;
// a Go panic answers 500 and the next request is served by a fresh object
// with the data intact.
func TestWorkerdEvictAndPanic(t *testing.T) {
	w, m := startWorkerdProvider(t)
	t.Run("evicted mid turn", func(t *testing.T) {
		s, sid, a := toolTurn(t, w, "evict-me", "the tool's settlement", isType(typeToolSettled))
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/abort")
		assert.GreaterOrEqual(t, code, 500, "the aborted request fails: %s", body)
		w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)
		w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true`, 30*time.Second)
		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
		assert.Equal(t, 1, m.requests("evict-me", "user"))
	})
	t.Run("panic", func(t *testing.T) {
		s := w.client(t)
		sid := s.create()
		a := s.prompt(sid, "before the panic")
		s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic")
		assert.Equal(t, http.StatusInternalServerError, code, "%s", body)
		assert.JSONEq(t, `{"error":{"type":"internal","message":"internal error"}}`, body)
		sn := s.snapshot(sid) // the next request: a fresh object, same data
		assert.Equal(t, sid, sn.ID)
		sum := s.settle(sid, a)
		sum.requireEnd(t, a, typeSucceeded, "")
		assert.GreaterOrEqual(t, strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid), 2, "a fresh object booted the tree again")
	})
}

// raw sends a request with no body and returns the status and body.
func (s *server) raw(method, path string) (int, string) {
	req, err := http.NewRequest(method, s.url+path, nil)
	require.NoError(s.t, err)
	resp, err := s.client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, string(b)
}
