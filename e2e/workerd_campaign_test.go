package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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
// tag. Each test kills one time after another, like TestWorkerdSIGKILL.

// scriptedModel answers by the conversation's last message: a user
// message gets a kv_put tool call (at once); a tool result gets a text
// answer of wordCount words streamed one per wordDelay. It records every
// request by the turn's first user text, and the last role.
type scriptedModel struct {
	wordDelay time.Duration
	// held, when set, receives the prompt of a tool-call step the model
	// holds open (a prompt with holdStep, its first request only) until
	// the request ends: a kill before the call exists.
	held chan string

	mu   sync.Mutex
	reqs []modelReq
}

type modelReq struct {
	prompt   string // the last user message
	lastRole string
	prefix   string // assistant text the request continues, if any
	users    string // every user message, joined (a resume adds a note of its own)
	toolSeen bool   // the conversation has a tool result: past the tool-call step
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
			rec.users += rec.prompt + "\n"
		case "tool":
			toolSeen, rec.prefix = true, ""
		case "assistant":
			if s, ok := msg.Content.(string); ok && toolSeen {
				rec.prefix = s // a resumed step continues the kept text
			}
		}
	}
	rec.toolSeen = toolSeen
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	firstAsk := 0
	for _, r := range m.reqs {
		if r.prompt == rec.prompt && r.lastRole == "user" {
			firstAsk++
		}
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(chunk string) {
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		flusher.Flush()
	}
	if toolSeen {
		// settle's probe, which no kill falls in, is answered unpaced.
		delay := m.wordDelay
		if rec.prompt == probeText {
			delay = 0
		}
		for _, word := range answerWords() {
			if strings.Contains(rec.prefix, word) {
				continue
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(delay): // paces the stream (the fake provider's behaviour, not a wait for a condition)
			}
			send(`{"choices":[{"index":0,"delta":{"content":` + quote(word+" ") + `}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	} else {
		name, args := "kv_put", `{"key":"k","value":"v"}`
		if strings.Contains(rec.users, ledgerTool) {
			name, args = ledgerTool, `{"entry":`+quote(rec.users)+`}`
		}
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":` + quote(name) + `,"arguments":` + quote(args) + `}}]}}]}`)
		if m.held != nil && strings.Contains(rec.prompt, holdStep) && rec.lastRole == "user" && firstAsk == 1 {
			m.held <- rec.prompt
			<-r.Context().Done() // held open until the kill ends the request
			return
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	}
	send("[DONE]")
}

// toolCallAsks counts the requests for the tool-call step (no tool result
// yet) of a conversation with a user message holding text.
func (m *scriptedModel) toolCallAsks(text string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.reqs {
		if strings.Contains(r.users, text) && !r.toolSeen {
			n++
		}
	}
	return n
}

// continued reports whether a request of the turn whose first user text
// holds prompt continued text (the assistant text of a resumed step).
func (m *scriptedModel) continued(prompt, text string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.reqs {
		if strings.Contains(r.users, prompt) && r.prefix == text {
			return true
		}
	}
	return false
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

func startWorkerdProvider(t *testing.T, vars ...string) (*workerd, *scriptedModel) {
	m := &scriptedModel{wordDelay: 120 * time.Millisecond}
	provider := httptest.NewServer(m) // loopback
	t.Cleanup(provider.Close)
	w := startWorkerdWith(t, "revenant_testroutes", append([]string{
		"OPENAI_BASE_URL:" + provider.URL + "/v1", "REVENANT_MODEL:fake-model", "OPENAI_API_KEY:sk-test-never-logged"}, vars...)...)
	return w, m
}

// TestWorkerdToolTurnKills: WORKERD_KILL_ROUNDS rounds (make e2e-workerd:
// 3) of five kills at points of a tool-calling turn with the provider.
func TestWorkerdToolTurnKills(t *testing.T) {
	// Not parallel (see workerd_test.go): the acceptance campaign's kills.
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
		{"once the tool-call step was recorded", toolKillAfterToolStep},
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

// toolKillMidStream: killed while the answer after the tool streams, past
// its first checkpoint. The tool step is not requested again, the tool
// ran once, the checkpointed text is kept and handed to the model as the
// text the resumed step continues, the turn ends once. The kill waits
// for the checkpoint itself, not for a number of words: the checkpoint
// is written on a timer (checkpoint_every, 1 s), which a loaded machine
// may run after many more words (campaign thirty-three: none within ten).
func toolKillMidStream(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s, sid, a := toolTurn(t, w, tag, "the answer's first checkpoint", isType(typeCheckpoint))
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
	assert.True(t, m.continued(tag, kept), "the resumed step continues the kept text %q: %+v", kept, m.reqs)
}

// toolKillAfterToolStep: killed as soon as the step that asked for the
// tool is recorded complete, whether or not the tool has settled yet
// (kv_put is idempotent: re-run with its key if it was executing). The
// step is not requested again and the tool settles once.
func toolKillAfterToolStep(t *testing.T, w *workerd, m *scriptedModel, tag string) {
	s, sid, a := toolTurn(t, w, tag, "the tool-call step", isType(typeStepDone))
	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once:%s", describe(sum.log))
	assert.Equal(t, 1, m.requests(tag, "user"), "the recorded tool-call step is not requested again")
	assert.Equal(t, 1, countType(sum.log, typeToolSettled), "the tool settled once")
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
	t.Parallel() // see workerd_test.go
	// The wait of a given-up object for its answers in hand, shortened
	// (the tests' build only) for "answers that never return".
	w, m := startWorkerdProvider(t, "REVENANT_TEST_GIVE_UP_WAIT_MS:"+strconv.Itoa(testGiveUpWaitMS))
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
		// A fresh object booted the tree again. Waited for: wrangler may
		// show Go's log line after the answers that followed it.
		w.waitLogTimes(t, `msg="tree booted" tree=`+sid, 2, 30*time.Second)
	})
	t.Run("a write at once after a panic", func(t *testing.T) {
		// The object answers a panic's 500 whole and then gives itself
		// up on a 0 ms timer. Under load the client's next request, a
		// write, could come first and met the abort: a 503, the front
		// not knowing whether the object had taken it. linger holds the
		// abort until that next request, the worst case: the spent
		// object now refuses it unread and the front sends it again to a
		// fresh object, which accepts it, once.
		s := w.client(t)
		sid := s.create()
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic?linger=1")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		a := s.prompt(sid, "right after the panic")
		resent := "the session's object was given up; sending the request again " + sid
		w.waitLog(t, resent, 30*time.Second)
		requireTakenOnce(t, s, sid, a)

		// A delete meets the same: done by a fresh object, then gone. The
		// write above may have been refused more than once (the first
		// send again is at once), so the delete's refusal is counted from
		// here.
		code, body = s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic?linger=1")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		before := strings.Count(w.logs.String(), resent)
		code, body = s.raw(http.MethodDelete, "/v1/sessions/"+sid)
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		w.waitLogTimes(t, resent, before+1, 30*time.Second)
		code, body = s.raw(http.MethodGet, "/v1/sessions/"+sid)
		assert.Equal(t, http.StatusNotFound, code, "%s", body)
	})
	t.Run("a write given up while its body was read", func(t *testing.T) {
		// Another request gives the object up while a write's body is
		// read: the object must not act on the write (its memory may no
		// longer match its storage) but refuse it unread, and the front
		// sends it again to a fresh object, which takes it once. The
		// test build's test-hold=body holds the write there until the
		// object is given up.
		s := w.client(t)
		sid := s.create()
		resent := "the session's object was given up; sending the request again " + sid
		before := strings.Count(w.logs.String(), resent)
		answered := make(chan heldAnswer, 1)
		go func() {
			answered <- s.held(http.MethodPost, "/v1/sessions/"+sid+"/prompt?test-hold=body", `{"text":"held while read"}`)
		}()
		w.waitLog(t, "the object holds a request (body) until it is given up: "+sid, 30*time.Second)
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic?linger=1")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		a := <-answered
		require.NoError(t, a.err)
		require.Equal(t, http.StatusAccepted, a.resp.StatusCode, "%s", a.body)
		w.waitLogTimes(t, resent, before+1, 30*time.Second)
		var adm admission
		require.NoError(t, json.Unmarshal([]byte(a.body), &adm))
		requireTakenOnce(t, s, sid, adm.PromptID)
	})
	t.Run("an event stream answered as the object was given up", func(t *testing.T) {
		// Go answered an event stream, and before the shim looked another
		// request gave the object up: the stream goes out as it is and
		// ends with the object's abort (its client reconnects to a fresh
		// object); read whole as other answers are, it would be held for
		// ever, since a stream never ends by itself. test-hold=answer
		// holds the answer there until the object is given up.
		s := w.client(t)
		sid := s.create()
		answered := make(chan heldAnswer, 1)
		go func() { answered <- s.held(http.MethodGet, "/v1/sessions/"+sid+"/events?test-hold=answer", "") }()
		w.waitLog(t, "the object holds a request (answer) until it is given up: "+sid, 30*time.Second)
		// Not lingering: no request follows to end a linger, and the
		// object goes once neither answer is pending.
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		// Less than the request's own deadline (waitTimeout).
		limit := time.NewTimer(waitTimeout / 2)
		defer limit.Stop()
		select {
		case a := <-answered:
			require.NoError(t, a.err)
			assert.Equal(t, http.StatusOK, a.resp.StatusCode, "%s", a.body)
			assert.Equal(t, "text/event-stream", a.resp.Header.Get("Content-Type"))
		case <-limit.C:
			t.Fatal("the event stream was held, not passed on and ended with the object")
		}
		// Its client nudges wrangler dev's proxy (nudging): the stream
		// failed mid-body.
		assert.Equal(t, sid, s.snapshot(sid).ID, "a fresh object serves the tree")
	})
	t.Run("answers that never return", func(t *testing.T) {
		// Go gave the object up with two answers pending that never
		// return (test-hold=never holds them in the shim; elsewhere a
		// handler waiting on a lock the panic left held). The object
		// must not wait for them for ever, refusing every other request
		// to the tree meanwhile (one stalled client would make it
		// unavailable): past its wait it aborts all the same and cuts
		// them. The front sends the cut read again, to a fresh object,
		// and answers the cut write 503 (the object may have acted on
		// it), never sending it again.
		s := w.client(t)
		sid := s.create()
		read := make(chan heldAnswer, 1)
		write := make(chan heldAnswer, 1)
		go func() { read <- s.held(http.MethodGet, "/v1/sessions/"+sid+"?test-hold=never", "") }()
		go func() {
			write <- s.held(http.MethodPost, "/v1/sessions/"+sid+"/prompt?test-hold=never", `{"text":"held for good"}`)
		}()
		w.waitLog(t, "the object holds a request for good: GET "+sid, 30*time.Second)
		w.waitLog(t, "the object holds a request for good: POST "+sid, 30*time.Second)
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		// A request that meets the given-up object is refused unread and
		// must not abort it by itself (an abort would cut the answers in
		// hand, which the front cannot tell from ones acted on): the wait
		// below still ends with the answers pending, logged as such. It
		// is answered 503 once the front's sends again are spent, or by a
		// fresh object if the wait ended first (a slow machine).
		code, body = s.raw(http.MethodGet, "/v1/sessions/"+sid)
		assert.Contains(t, []int{http.StatusServiceUnavailable, http.StatusOK}, code, "%s", body)
		if code == http.StatusServiceUnavailable {
			// Refused at every send, it was sent again as often as the
			// front's waits allow (SPENT_WAITS_MS, four: on Cloudflare an
			// abort waits for the storage's round trip, so fewer would
			// answer 503 a write a fresh object would have taken) before
			// the front answered 503 itself.
			w.waitLog(t, "the session's object stayed given up "+sid, 30*time.Second)
			resent := strings.Count(w.logs.String(), "the session's object was given up; sending the request again "+sid)
			assert.Equal(t, 4, resent, "the front's sends again of a request the given-up object refused")
		}
		// Less than the requests' own deadline (waitTimeout).
		limit := time.NewTimer(waitTimeout / 2)
		defer limit.Stop()
		var r, wr heldAnswer
		for range 2 {
			select {
			case r = <-read:
			case wr = <-write:
			case <-limit.C:
				t.Fatal("the given-up object was never aborted: it waits for ever for the answers it holds")
			}
		}
		// The wait the shim kept is the one Go set at boot (giveUpWaitMS:
		// here REVENANT_TEST_GIVE_UP_WAIT_MS; else from interrupt_grace),
		// not the shim's own default.
		w.waitLog(t, "revenant: tree "+sid+": 2 answers still pending "+strconv.Itoa(testGiveUpWaitMS)+" ms", 30*time.Second)
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusOK, r.resp.StatusCode, "the cut read, sent again to a fresh object: %s", r.body)
		w.waitLog(t, "a read's object fetch failed; sending it again", 30*time.Second)
		require.NoError(t, wr.err)
		assert.Equal(t, http.StatusServiceUnavailable, wr.resp.StatusCode, "the cut write: %s", wr.body)
		assert.Contains(t, wr.body, `"type":"unavailable"`)
		// The tree serves on: a write is taken once, and the cut one never.
		b := s.prompt(sid, "after the cut")
		sum := s.settle(sid, b)
		sum.requireEnd(t, b, typeSucceeded, "")
		for _, e := range sum.log {
			if e.Type == typeAdmitted {
				assert.NotContains(t, string(e.Data), "held for good", "the cut write was taken:%s", describe(sum.log))
			}
		}
		assert.Zero(t, m.requests("held for good", "user"), "the cut write's turn ran")
	})
	t.Run("a storage sync that never settles", func(t *testing.T) {
		// An object given up with no answer pending waits for the
		// storage's pending writes (storage.sync) before it aborts, and
		// refuses every request to the tree until then. On Cloudflare
		// that sync is a round trip to the storage's replicas and might
		// never settle: the object must abort all the same, past its wait
		// (locally sync settles at once, so only the test build's
		// test-sync=never shows it). The tree's other event stream ends
		// with the abort, and a fresh object serves the tree next.
		s := w.client(t)
		sid := s.create()
		ended := streamEnd(s, sid)
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/panic?test-sync=never")
		require.Equal(t, http.StatusInternalServerError, code, "%s", body)
		w.waitLog(t, "the object's storage.sync never settles: "+sid, 30*time.Second)
		requireAbortedThenFresh(t, w, s, sid, ended, "the given-up object was never aborted: it waits for ever for a storage.sync that never settles")
		w.waitLog(t, "tree "+sid+": storage.sync did not settle "+strconv.Itoa(testGiveUpWaitMS)+" ms", 5*time.Second)
	})
	t.Run("a delete whose turn ignores its cancellation", func(t *testing.T) {
		// A delete waits for the tree's turns to stop as long as an
		// interrupt waits for one (interrupt_grace, 5 s here). A turn that
		// ignores its cancellation (the stuck-turn route's; elsewhere a
		// tool deaf to its context) may still write, so the object must
		// not delete the storage under it, nor wait for it for good (the
		// client would get no answer, the tree half deleted): it deletes
		// nothing, answers 503 and gives itself up, and its abort ends the
		// turn. Deleting again reaches a fresh object, whose turn (resumed,
		// and not deaf) stops, and the tree goes.
		s := w.client(t)
		sid := s.create()
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/stuck-turn")
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		s.prompt(sid, "deaf to its cancellation")
		w.waitLog(t, `msg="test route: this turn ignores its cancellation" tree=`+sid, 30*time.Second)
		code, body = s.raw(http.MethodDelete, "/v1/sessions/"+sid) // fails at its deadline if never answered
		require.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
		assert.Contains(t, body, "did not stop in time for the delete")
		code, body = s.raw(http.MethodDelete, "/v1/sessions/"+sid)
		require.Equal(t, http.StatusNoContent, code, "deleting again, on a fresh object: %s", body)
		w.waitLogTimes(t, `msg="tree booted" tree=`+sid, 2, 30*time.Second)
		code, body = s.raw(http.MethodGet, "/v1/sessions/"+sid)
		assert.Equal(t, http.StatusNotFound, code, "%s", body)
	})
	t.Run("Go exited between events", func(t *testing.T) {
		// The Go program ends mid turn with no request in flight (a panic
		// escaped a goroutine of its own), and no client request follows:
		// the alarm meets the spent object, which must give itself up so
		// workerd retries the alarm on a fresh object, which resumes the
		// turn. An alarm that called the ended program instead (its error
		// caught, as the shim catches every other) would be spent, and the
		// turn would wait for a client request that never comes. (Where
		// the abort sits, in the try or before it, workerd does not show:
		// ctx.abort ends the handler's execution, which no catch sees.)
		s, sid, a := toolTurn(t, w, "exit-between-events", "the tool's settlement", isType(typeToolSettled))
		from := w.logLen()
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit")
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		w.waitLog(t, "panic: revenant test route: exit", 30*time.Second)
		// No handler returns before the fresh boot: one that held for
		// the turn (which the exit cut, unfinished) fails with the
		// program, and the next alarm meets the spent object.
		w.requireAlarmRetried(t, sid, from)
		w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)
		w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true resumed=`, 30*time.Second)
		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
		assert.Equal(t, 1, m.requests("exit-between-events", "user"), "the tool-call step is not requested again")
	})
	for _, then := range []string{"panic", "exit"} {
		t.Run("alarm handler "+then, func(t *testing.T) {
			// The alarm's handler panics, or the Go program ends during
			// it: the alarm is used up and nothing re-armed, so the
			// object must give itself up, and workerd retries the alarm
			// on a fresh object, whose boot re-arms and whose handler
			// runs. Swallowed (the shim caught every alarm failure, and
			// waited on an ended program's Promise for ever), the tree's
			// claims had no wake-up while the object lived, and here no
			// client request comes to boot it again. A handler that
			// returns says so in the tests' build, so a swallowed failure
			// fails here as the handler returns (requireAlarmRetried).
			s := w.client(t)
			sid := s.create()
			booted := `msg="tree booted" tree=` + sid
			// The create's own boot first: wrangler's output may show its
			// line only after the create's answer (so the count below once
			// read 0, then 2, under load).
			w.waitLog(t, booted, 30*time.Second)
			boots, from := strings.Count(w.logs.String(), booted), w.logLen()
			code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/alarm?then="+then)
			require.Equal(t, http.StatusNoContent, code, "%s", body)
			w.requireAlarmRetried(t, sid, from)
			w.waitLog(t, alarmReturned+sid, 30*time.Second)
			assert.Contains(t, w.logs.String()[from:], `msg="alarm handled" tree=`+sid, "the retried handler ran")
			assert.Equal(t, boots+1, strings.Count(w.logs.String(), booted), "the retried alarm met a fresh object")
		})
	}
	t.Run("Go exited during a request", func(t *testing.T) {
		// The program ends while a request waits for its answer: the
		// shim answers that request from the program's end instead of
		// waiting forever and gives the object up (the abort reaches the
		// front as a failed object fetch: 503), and the next request is
		// served by a fresh object with the data intact.
		s := w.client(t)
		sid := s.create()
		a := s.prompt(sid, "before the exit")
		s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit-now")
		assert.GreaterOrEqual(t, code, 500, "the request the program left fails, and is answered: %s", body)
		sn := s.snapshot(sid)
		assert.Equal(t, sid, sn.ID, "a fresh object serves the tree")
		s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")
	})
	t.Run("Go exited later during a request", func(t *testing.T) {
		// As above, the program ending from a timer, after Go's call for
		// the request returned its Promise: that Promise never settles,
		// and only the program's end can answer the request (the shim's
		// untilEnded). The plain exit-now ends the program inside that
		// call, which throws, and does not tell.
		s := w.client(t)
		sid := s.create()
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit-now?later=1")
		assert.GreaterOrEqual(t, code, 500, "the request the program left fails, and is answered: %s", body)
		w.waitLog(t, "revenant: fetch failed: Error: the Go program exited", 30*time.Second) // answered from the program's end
		sn := s.snapshot(sid)
		assert.Equal(t, sid, sn.ID, "a fresh object serves the tree")
	})
	t.Run("Go exited during a read", func(t *testing.T) {
		// As above, for a read: the object is given up with the read in
		// hand and the front's fetch fails. A read is safe to send again,
		// so the front sends it once more, to a fresh object, and the
		// client gets its answer, not a 503.
		s := w.client(t)
		sid := s.create()
		const resent = "a read's object fetch failed; sending it again"
		before := strings.Count(w.logs.String(), resent)
		code, body := s.raw(http.MethodGet, "/v1/sessions/"+sid+"/test/read-exit")
		assert.Equal(t, http.StatusNoContent, code, "answered by a fresh object: %s", body)
		w.waitLogTimes(t, resent, before+1, 30*time.Second)
	})
	t.Run("Go exited between events, then a write", func(t *testing.T) {
		// The program ends after an idle tree's answer; the next event is
		// a client's write. The object it reaches is spent: it refuses the
		// write unread and gives itself up, and the front sends the write
		// again, to a fresh object, so the client sees its 202, not a 503.
		s := w.client(t)
		sid := s.create()
		a := s.prompt(sid, "before the exit")
		s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")
		const exited = "panic: revenant test route: exit"
		resent := "the session's object was given up; sending the request again " + sid
		exits := strings.Count(w.logs.String(), exited)
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit")
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		w.waitLogTimes(t, exited, exits+1, 30*time.Second)
		b := s.prompt(sid, "after the exit")
		w.waitLog(t, resent, 30*time.Second)
		s.settle(sid, b).requireEnd(t, b, typeSucceeded, "")
	})
	t.Run("delete cut before the directory row", func(t *testing.T) {
		// The front deletes the tree in its object, then the directory
		// row; killed between the two, the session stays listed while
		// its routes answer 404. Deleting it again completes the delete:
		// 204, and the list agrees.
		s := w.client(t)
		sid := s.create()
		code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/delete-tree")
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		require.Contains(t, s.listed(), sid, "the row is still there")
		code, _ = s.raw(http.MethodGet, "/v1/sessions/"+sid)
		require.Equal(t, http.StatusNotFound, code, "the tree is gone")
		// A child's id deletes nothing, here as anywhere: the session is
		// not found (not 204, as if the child had been deleted), and the
		// row is left to the root's delete.
		code, _ = s.raw(http.MethodDelete, "/v1/sessions/"+sid+".1")
		assert.Equal(t, http.StatusNotFound, code, "a child's delete of a tree gone")
		require.Contains(t, s.listed(), sid, "the row is left to the root's delete")
		s.do(http.MethodDelete, "/v1/sessions/"+sid, nil, http.StatusNoContent, nil)
		assert.NotContains(t, s.listed(), sid)
		code, _ = s.raw(http.MethodDelete, "/v1/sessions/"+sid)
		assert.Equal(t, http.StatusNotFound, code, "a session deleted and unlisted is not found")
	})
	// A delete whose deleteAll fails after the turn was stopped: 503,
	// and with no further client request the tree lives on, its turn
	// resumed by the alarm on a fresh object; deleting again works. The
	// storage call may reject, or throw (as a broken object's does).
	for _, how := range []string{"reject", "throw"} {
		t.Run("failed delete that "+how+"s", func(t *testing.T) {
			marker := "fail-delete-" + how
			s, sid, a := toolTurn(t, w, marker, "the tool's settlement", isType(typeToolSettled))
			code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/fail-delete?how="+how)
			require.Equal(t, http.StatusNoContent, code, "%s", body)
			code, body = s.raw(http.MethodDelete, "/v1/sessions/"+sid)
			assert.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
			assert.Contains(t, body, `"type":"unavailable"`)
			w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, 30*time.Second)
			w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true resumed=`, 30*time.Second)
			sum := s.settle(sid, a)
			ta := sum.requireEnd(t, a, typeSucceeded, "")
			require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
			assert.Equal(t, 1, m.requests(marker, "user"))
			assert.Contains(t, s.listed(), sid, "still listed")
			s.do(http.MethodDelete, "/v1/sessions/"+sid, nil, http.StatusNoContent, nil)
			code, _ = s.raw(http.MethodGet, "/v1/sessions/"+sid)
			assert.Equal(t, http.StatusNotFound, code, "deleted the second time")
		})
	}
	t.Run("a panic in an answered stream", func(t *testing.T) {
		// Last: a request of a subtest after it once got wrangler dev's
		// "Your worker restarted mid-request" (no restart: its proxy's
		// answer to a failed forward of a POST; see nudging).
		// A handler that panics after its event stream went out leaves
		// no answer for the shim to check: the object must give itself
		// up all the same (its memory no longer matches its storage),
		// not serve on until the tree's next event. The tree's other
		// event stream ends with it; a fresh object serves next.
		s := w.client(t)
		sid := s.create()
		ended := streamEnd(s, sid)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/sessions/"+sid+"/test/stream-panic", nil)
		require.NoError(t, err)
		resp, err := s.client.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the stream went out before the panic")
		// The object errors the stream; wrangler dev's proxy ends it to
		// the client as if whole.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		requireAbortedThenFresh(t, w, s, sid, ended, "the object was not given up: the tree's other event stream still runs")
	})
}

// streamEnd opens an event stream of tree sid and reads it to its end,
// which the returned channel then gets: the error that ended it (the
// object's abort ends its streams).
func streamEnd(s *server, sid string) <-chan error {
	other := s.follow(sid, 0)
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := other.next(); err != nil {
				ended <- err
				return
			}
		}
	}()
	return ended
}

// requireAbortedThenFresh requires that tree sid's stream (ended, of
// streamEnd) ends with its object's abort, sooner than its own deadline
// (else it fails with never), and that a fresh object then serves the
// tree.
func requireAbortedThenFresh(t *testing.T, w *workerd, s *server, sid string, ended <-chan error, never string) {
	t.Helper()
	// Less than the stream's own deadline (waitTimeout), which would end
	// it too.
	limit := time.NewTimer(waitTimeout / 2)
	defer limit.Stop()
	select {
	case err := <-ended:
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
	case <-limit.C:
		t.Fatal(never)
	}
	// Its client nudges wrangler dev's proxy (nudging): the failed
	// streams leave the proxy a broken connection to the Worker, and a
	// read forwarded on it waits for the proxy's next request.
	assert.Equal(t, sid, s.snapshot(sid).ID, "a fresh object serves the tree")
	w.waitLogTimes(t, `msg="tree booted" tree=`+sid, 2, 30*time.Second)
}

// testGiveUpWaitMS is TestWorkerdEvictAndPanic's wait of a given-up
// object for its answers in hand (REVENANT_TEST_GIVE_UP_WAIT_MS; else
// the tree's interrupt_grace makes it, durableobject.giveUpWait): short,
// so that "answers that never return" is quick, yet long enough for
// every answer that does return under load on this machine.
const testGiveUpWaitMS = 3000

// requireTakenOnce settles session sid's prompt promptID and requires
// that it succeeded and was admitted once: a write sent again by the
// front after a refusal was not also taken the first time.
func requireTakenOnce(t *testing.T, s *server, sid, promptID string) {
	t.Helper()
	sum := s.settle(sid, promptID)
	sum.requireEnd(t, promptID, typeSucceeded, "")
	admitted := 0
	for _, e := range sum.log {
		if e.Type == typeAdmitted && e.P.PromptID == promptID {
			admitted++
		}
	}
	assert.Equal(t, 1, admitted, "the write taken once:%s", describe(sum.log))
}

// heldAnswer is held's result: the answer, its whole body, or the error
// that ended either (the body read too: a stream ends only as its object
// goes).
type heldAnswer struct {
	resp *http.Response
	body string
	err  error
}

// held sends a request (a JSON body unless empty) off the test's
// goroutine, for one that the object holds (test-hold), and reads its
// answer whole.
func (s *server) held(method, path, body string) heldAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(body))
	if err != nil {
		return heldAnswer{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return heldAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if method == http.MethodGet && err != nil && !errors.Is(err, context.DeadlineExceeded) {
		err = nil // the stream cut as its object went
	}
	return heldAnswer{resp: resp, body: string(b), err: err}
}

// raw sends a request with no body and returns the status and body. It
// fails at a deadline: a request the object never answers must not hang
// the run.
func (s *server) raw(method, path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, nil)
	require.NoError(s.t, err)
	resp, err := s.client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, string(b)
}

// The webhook-ledger scenario: a non-idempotent webhook tool (REVENANT_TOOLS,
// its signing secret named by secret_env) POSTs to a ledger on loopback in
// this process. The webhook's URL is the operator's own destination,
// trusted by its client alone (tools/web), so no egress allow rule opens
// loopback to http_request.

const (
	ledgerTool = "ledger"
	// Markers in a prompt (and so in the webhook's body) saying where the
	// test kills: the model holds the tool-call step open; the ledger holds
	// a delivery before recording it, or after.
	holdStep   = "hold-step"
	holdBefore = "hold-before-record"
	holdAfter  = "hold-after-record"
	// ledgerSecret is the webhook's signing secret (a Worker var here,
	// a secret in production); it must never reach the logs.
	ledgerSecret = "whsec_bGVkZ2VyLXNlY3JldC1uZXZlci1sb2dnZWQ="
)

// ledger is the webhook receiver: it verifies each delivery's signature,
// counts arrivals and recorded deliveries by webhook-id, and can hold a
// delivery open (before or after recording it, per the body's marker) so
// the test kills workerd there.
type ledger struct {
	key  []byte
	held chan string // the webhook-id of a held delivery

	mu         sync.Mutex
	arrivals   map[string]int
	recorded   map[string]int
	bodies     map[string]string // by webhook-id, the first arrival's
	unverified int
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := r.Header.Get("webhook-id")
	l.mu.Lock()
	if !verifyStandardWebhook(l.key, r.Header, body) || r.Header.Get("Idempotency-Key") != id {
		l.unverified++
		l.mu.Unlock()
		http.Error(w, "unverified", http.StatusUnauthorized)
		return
	}
	l.arrivals[id]++
	first := l.arrivals[id] == 1
	if first {
		l.bodies[id] = string(body)
	}
	l.mu.Unlock()
	hold := func() {
		l.held <- id
		<-r.Context().Done() // held open until the kill ends the request
	}
	if first && strings.Contains(string(body), holdBefore) {
		hold()
		return
	}
	l.mu.Lock()
	l.recorded[id]++
	l.mu.Unlock()
	if first && strings.Contains(string(body), holdAfter) {
		hold()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"recorded":%s}`, quote(id))
}

// deliveries lists the webhook-ids whose body holds text, with how many
// times each arrived and was recorded.
func (l *ledger) deliveries(text string) (ids []string, arrivals, recorded int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, body := range l.bodies {
		if strings.Contains(body, text) {
			ids = append(ids, id)
			arrivals += l.arrivals[id]
			recorded += l.recorded[id]
		}
	}
	return ids, arrivals, recorded
}

// TestWorkerdWebhookLedger kills the whole process group at the worst
// moments of a non-idempotent webhook call, restarts on the same state and
// sends no client request until the alarm has finished the turn; then the
// ledger saw each webhook-id at most once, the call settled once (outcome
// unknown when the kill fell after the call began), and the turn ended
// once. WORKERD_KILL_ROUNDS repeats the three kills.
func TestWorkerdWebhookLedger(t *testing.T) {
	// Not parallel (see workerd_test.go): the acceptance campaign's kills.
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ledgerSecret, "whsec_"))
	require.NoError(t, err)
	l := &ledger{key: key, held: make(chan string, 4), arrivals: map[string]int{}, recorded: map[string]int{}, bodies: map[string]string{}}
	ledgerSrv := httptest.NewServer(l) // loopback
	t.Cleanup(ledgerSrv.Close)
	m := &scriptedModel{wordDelay: 20 * time.Millisecond, held: make(chan string, 4)}
	provider := httptest.NewServer(m)
	t.Cleanup(provider.Close)
	tools := `{"webhook_tools":[{"name":"` + ledgerTool + `","description":"Record an entry in the ledger.",` +
		`"url":"` + ledgerSrv.URL + `/hook","idempotent":false,"permission":"allow","secret_env":"LEDGER_SECRET"}]}`
	w := startWorkerdWith(t, "revenant_testroutes",
		"OPENAI_BASE_URL:"+provider.URL+"/v1", "REVENANT_MODEL:fake-model", "OPENAI_API_KEY:sk-test-never-logged",
		"REVENANT_TOOLS:"+tools, "LEDGER_SECRET:"+ledgerSecret)

	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("WORKERD_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for r := range rounds {
		for _, sc := range []struct {
			name, marker string
			unknown      bool // the kill fell after the call began: outcome unknown
			recorded     int  // deliveries the ledger recorded
		}{
			{"before the call: tool-call step streaming", holdStep, false, 1},
			{"delivery arrived, not yet recorded", holdBefore, true, 0},
			{"delivery recorded, before the settlement", holdAfter, true, 1},
		} {
			tag := fmt.Sprintf("%s %s-%d", ledgerTool, sc.marker, r)
			if !t.Run(fmt.Sprintf("%s/%d", sc.name, r), func(t *testing.T) {
				ledgerKill(t, w, m, l, tag, sc.marker, sc.unknown, sc.recorded)
			}) {
				return
			}
		}
	}
	logs := w.logs.String()
	assert.NotContains(t, logs, ledgerSecret, "the webhook secret never reaches the logs")
	assert.NotContains(t, logs, "sk-test-never-logged")
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Zero(t, l.unverified, "every delivery was signed")
	for id, n := range l.arrivals {
		assert.Equal(t, 1, n, "webhook-id %s arrived at most once", id)
	}
}

func ledgerKill(t *testing.T, w *workerd, m *scriptedModel, l *ledger, text, marker string, unknown bool, recorded int) {
	s := w.client(t)
	sid := s.create()
	a := s.prompt(sid, text)
	held := l.held
	if marker == holdStep {
		held = m.held
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing held for %q:\n%s", text, w.logs)
	}
	w.restart(t)
	w.resumedByAlarm(t, sid) // no client request until the alarm finished the turn

	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once, by the alarm:%s", describe(sum.log))
	var settled []struct{ Outcome, Output string }
	for _, e := range sum.log {
		if e.Type != typeToolSettled || e.P.PromptID != "" && e.P.PromptID != a {
			continue
		}
		var d struct{ Outcome, Output string }
		require.NoError(t, json.Unmarshal(e.Data, &d))
		settled = append(settled, d)
	}
	// (The probe prompt is answered with text: its conversation already
	// has a tool result.)
	require.Len(t, settled, 1, "the webhook call settled once:%s", describe(sum.log))
	hook := settled[0]
	if marker == holdStep {
		assert.Equal(t, 2, m.toolCallAsks(text), "the cut tool-call step is asked again")
	} else {
		assert.Equal(t, 1, m.toolCallAsks(text), "the recorded tool-call step is not asked again")
	}
	if unknown {
		assert.Equal(t, "interrupted", hook.Outcome)
		assert.Contains(t, hook.Output, "The outcome of this call is unknown")
	} else {
		assert.Equal(t, "ok", hook.Outcome, "%s", hook.Output)
		assert.Contains(t, hook.Output, `"recorded":`)
	}
	ids, arrivals, rec := l.deliveries(text)
	require.Len(t, ids, 1, "one webhook-id for the one call")
	assert.Equal(t, 1, arrivals, "the ledger saw webhook-id %s once", ids[0])
	assert.Equal(t, recorded, rec, "deliveries recorded for %s", ids[0])
}

// verifyStandardWebhook checks a delivery as a receiver following the
// Standard Webhooks specification would, written here from the spec
// rather than with tools/web (e2e stays black-box): a v1 signature of
// "id.timestamp.body" under HMAC-SHA256 with the decoded whsec_ key, and a
// timestamp within five minutes.
func verifyStandardWebhook(key []byte, h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// TestWorkerdExitDuringAlarm: the Go program ends (a panic escapes a
// goroutine of its own) while the alarm handler holds for the turn that
// runs, and no client request follows. The shim must answer the alarm from
// the program's end, as it answers a request, and give the object up, so
// workerd retries the alarm on a fresh object, whose boot resumes the
// turn. Awaiting Go's alarm Promise alone, the handler waited on a
// program that would never settle it (the hold's timer kept it from
// counting as hung), and the turn waited with it.
func TestWorkerdExitDuringAlarm(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	sid := s.create()
	a := s.prompt(sid, "/sleep 120s\nlate")
	st := s.follow(sid, 0)
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()
	// The claim's wake-up fires while the turn sleeps here: the handler
	// holds for it.
	w.waitLog(t, `msg="alarm swept" tree=`+sid+` running=true`, waitTimeout)
	boots, from := strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid), w.logLen()
	code, body := s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit")
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	w.waitLog(t, "panic: revenant test route: exit", waitTimeout)
	// The handler holds for up to a minute (DefaultAlarmHold), far past
	// the exit: a return before the fresh boot is the ended program's.
	w.requireAlarmRetried(t, sid, from)
	w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, waitTimeout)
	assert.Greater(t, strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid), boots, "a fresh object booted the tree")
	assert.True(t, s.interrupt(sid), "the resumed turn runs")
}
