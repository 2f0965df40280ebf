package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Event types of durable questions.
const (
	typeParked            = "session.step.parked@1"
	typeQuestionAnswered  = "session.question.answered@1"
	typeQuestionCancelled = "session.question.cancelled@1"
)

// askingProvider is an OpenAI-compatible endpoint on loopback whose model
// asks one question through the question tool when the prompt is
// askingPrompt, then, once the tool result is in the transcript, answers
// with that result; any other prompt (settle's probe) gets a plain answer.
// It counts the asking and the answering requests: the asking step must
// be requested once, whatever was killed.
type askingProvider struct {
	mu            sync.Mutex
	asks, answers int
	results       []string // the tool results it was shown
}

func (f *askingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	// The turn's prompt is the last user message that is not revenant's
	// continuation notice; a tool result after it is the answer.
	prompt, result := "", ""
	for _, m := range req.Messages {
		switch text := fmt.Sprint(m.Content); {
		case m.Role == "user" && !strings.HasPrefix(text, "The previous run was interrupted."):
			prompt, result = text, ""
		case m.Role == "tool":
			result = text
		}
	}
	asking := prompt == askingPrompt
	f.mu.Lock()
	switch {
	case asking && result != "":
		f.answers++
		f.results = append(f.results, result)
	case asking:
		f.asks++
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(chunk string) { fmt.Fprintf(w, "data: %s\n\n", chunk) }
	switch {
	case asking && result != "":
		send(`{"choices":[{"index":0,"delta":{"content":` + quote("Noted. "+result) + `}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	case !asking:
		send(`{"choices":[{"index":0,"delta":{"content":"Fine."}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	default:
		args := `{"questions":[{"question":"Which city?","choices":["Lisbon","Porto"]}]}`
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_q","type":"function","function":{"name":"question","arguments":` + quote(args) + `}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	}
	send("[DONE]")
}

const askingPrompt = "Where do I live?"

func (f *askingProvider) counts() (asks, answers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asks, f.answers
}

// pendingQuestion is one question of GET …/questions.
type pendingQuestion struct {
	ID       string `json:"id"`
	PromptID string `json:"prompt_id"`
	Request  struct {
		Questions []struct {
			Question string   `json:"question"`
			Choices  []string `json:"choices"`
		} `json:"questions"`
	} `json:"request"`
}

func (s *server) questions(sid string) []pendingQuestion {
	s.t.Helper()
	var out struct {
		Questions []pendingQuestion `json:"questions"`
	}
	s.do("GET", "/v1/sessions/"+sid+"/questions", nil, http.StatusOK, &out)
	return out.Questions
}

// replyResult is a reply's 200, or a 409's winner.
type replyResult struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ResponseID string `json:"response_id"`
	Duplicate  bool   `json:"duplicate"`
}

// TestQuestionAcrossSIGKILL asks a question, SIGKILLs the server while the
// turn waits for the answer, restarts it over the same data directory and
// replies to the same question id, in each mode of the server: the answer
// continues the turn without asking the model for the parked step again;
// a cancel ends the turn interrupted{user}; a kill right after the
// answer's 200 still gives exactly one continuation.
func TestQuestionAcrossSIGKILL(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		t.Run("Answer", func(t *testing.T) { questionAcrossKill(t, false, false) })
		t.Run("Cancel", func(t *testing.T) { questionAcrossKill(t, true, false) })
		t.Run("KilledRightAfterTheAnswer", func(t *testing.T) { questionAcrossKill(t, false, true) })
	})
}

func questionAcrossKill(t *testing.T, cancel, killAfterReply bool) {
	fake := &askingProvider{}
	provider := httptest.NewServer(fake)
	defer provider.Close()
	s := startWith(t, t.TempDir(), "OPENAI_BASE_URL="+provider.URL+"/v1", "OPENAI_API_KEY=sk-test", "REVENANT_MODEL=fake-model")
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, askingPrompt)
	parked := st.until("the step to park", isType(typeParked))
	st.close()
	qs := s.questions(sid)
	require.Len(t, qs, 1, "one question pending")
	qid := qs[0].ID
	assert.Equal(t, a, qs[0].PromptID)
	assert.Equal(t, []string{"Lisbon", "Porto"}, qs[0].Request.Questions[0].Choices)
	assert.Equal(t, "waiting", s.snapshot(sid).Status)
	s.kill()

	s = s.restart()
	again := s.questions(sid)
	require.Len(t, again, 1, "still pending after the SIGKILL")
	assert.Equal(t, qid, again[0].ID, "the same question id after the restart")
	assert.Equal(t, "waiting", s.snapshot(sid).Status, "a killed wait is still a wait, not a cancellation")

	body := map[string]any{"answers": [][]string{{"Lisbon"}}, "response_id": "reply-1"}
	if cancel {
		body = map[string]any{"cancel": true, "response_id": "reply-1"}
	}
	var won replyResult
	s.do("POST", "/v1/sessions/"+sid+"/questions/"+qid, body, http.StatusOK, &won)
	assert.Equal(t, "reply-1", won.ResponseID)
	if killAfterReply {
		s.kill()
		s = s.restart()
	}
	// The same reply again is the same 200; another is refused with the
	// winner.
	var dup replyResult
	s.do("POST", "/v1/sessions/"+sid+"/questions/"+qid, body, http.StatusOK, &dup)
	assert.Equal(t, "reply-1", dup.ResponseID)
	assert.True(t, dup.Duplicate)
	var conflict struct {
		Winner replyResult `json:"winner"`
	}
	s.do("POST", "/v1/sessions/"+sid+"/questions/"+qid, map[string]any{"answers": [][]string{{"Porto"}}, "response_id": "reply-2"}, http.StatusConflict, &conflict)
	assert.Equal(t, "reply-1", conflict.Winner.ResponseID)

	sum := s.settle(sid, a)
	assert.Empty(t, s.questions(sid), "nothing pending once resolved")
	asks, answers := fake.counts()
	assert.Equal(t, 1, asks, "the parked step is requested once, never again after the kill")
	assert.Equal(t, 1, sum.byType[typeParked])
	continuations := 0
	for _, e := range sum.log {
		if e.Type == typeStarted && e.P.Cause == "resolution" {
			continuations++
			assert.Greater(t, e.Seq, parked.Seq)
		}
	}
	if !killAfterReply {
		assert.Zero(t, sum.byType[typeResumed], "a parked turn is not resumed; log:%s", describe(sum.log))
	}
	if cancel {
		ta := sum.requireEnd(t, a, typeInterrupted, "user")
		assert.Equal(t, 1, sum.byType[typeQuestionCancelled])
		assert.Zero(t, sum.byType[typeQuestionAnswered])
		assert.Len(t, ta.starts, 1, "no continuation of a cancelled question")
		assert.Zero(t, continuations)
		assert.Zero(t, answers, "the model is not asked again")
		return
	}
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typeQuestionAnswered])
	assert.Zero(t, sum.byType[typeQuestionCancelled], "neither the kill nor the restart cancels the question")
	assert.Equal(t, 1, continuations, "exactly one continuation; log:%s", describe(sum.log))
	assert.Len(t, ta.starts, 2+len(ta.resumes), "the turn's start, its continuation and a resume per kill in it")
	assert.LessOrEqual(t, len(ta.resumes), 1)
	// A kill right after the answer may cut the continuation's request:
	// that step, never recorded, is requested again; the parked one never.
	assert.GreaterOrEqual(t, answers, 1)
	assert.LessOrEqual(t, answers, 1+len(ta.resumes), "the continuation asks the model once (again only after a kill in it)")
	require.NotEmpty(t, ta.done)
	assert.Contains(t, ta.done[len(ta.done)-1].P.Text, "Lisbon", "the answer reaches the model as the tool's result")
	assert.True(t, strings.HasPrefix(ta.done[len(ta.done)-1].P.Text, "Noted. "))
}
