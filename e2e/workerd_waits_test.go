package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Durable waits in the Durable Object host, through the front Worker:
// a question, a permission request and a foreground sub-agent whose child
// asks, all parked in one wrangler run, SIGKILLed and restarted on the
// same state, then resolved. Two kill cycles in all: one while the three
// wait, one right after a reply's 200.

// Event types of sub-agents.
const typeTaskResolved = "session.task.resolved@1"

// blockerSnap is the part of the snapshot that lists a session's own
// pending blockers.
type blockerSnap struct {
	Status   string `json:"status"`
	Blockers []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	} `json:"blockers"`
}

func (s *server) blockers(sid string) blockerSnap {
	s.t.Helper()
	var out blockerSnap
	s.do("GET", "/v1/sessions/"+sid+"?limit=1", nil, http.StatusOK, &out)
	return out
}

// requireWaitingOn checks the session is waiting with exactly the one
// blocker id of kind kind in its snapshot.
func requireWaitingOn(t *testing.T, s *server, sid, id, kind string) {
	t.Helper()
	b := s.blockers(sid)
	require.Equal(t, "waiting", b.Status, "session %s", sid)
	require.Len(t, b.Blockers, 1, "session %s: one blocker", sid)
	assert.Equal(t, id, b.Blockers[0].ID, "session %s", sid)
	assert.Equal(t, kind, b.Blockers[0].Kind, "session %s", sid)
}

// waitParked follows sid's stream from the start until its step parked.
func waitParked(s *server, sid string) {
	st := s.follow(sid, 0)
	st.until("session "+sid+" to park", isType(typeParked))
	st.close()
}

// questionIDs lists the ids of GET …/questions on sid.
func questionIDs(s *server, sid string) []string {
	var ids []string
	for _, q := range s.questions(sid) {
		ids = append(ids, q.ID)
	}
	return ids
}

// replyTwice checks first-response-wins on a resolved blocker: the
// winning body again is 200 duplicate, another reply 409 with the winner,
// and bob gets 404 for the winning body.
func replyTwice(t *testing.T, s, bob *server, path string, won, other map[string]any) {
	t.Helper()
	var dup replyResult
	s.do("POST", path, won, http.StatusOK, &dup)
	assert.True(t, dup.Duplicate, "%s: the same reply again", path)
	assert.Equal(t, won["response_id"], dup.ResponseID)
	var conflict struct {
		Winner replyResult `json:"winner"`
	}
	s.do("POST", path, other, http.StatusConflict, &conflict)
	assert.Equal(t, won["response_id"], conflict.Winner.ResponseID, "%s: the 409 names the winner", path)
	bob.do("POST", path, won, http.StatusNotFound, nil)
}

// terminals counts the turn ends of a prompt in a log.
func terminals(log []ev, promptID string) int {
	n := 0
	for _, e := range log {
		if e.P.PromptID == promptID && e.terminal() {
			n++
		}
	}
	return n
}

// resolutions counts the executions a reply started.
func resolutions(log []ev) int {
	n := 0
	for _, e := range log {
		if e.Type == typeStarted && e.P.Cause == "resolution" {
			n++
		}
	}
	return n
}

func TestWorkerdDurableWaits(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", "REVENANT_TOKENS:"+frontTokens, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s, bob := w.as(t, "a-token"), w.as(t, "b-token")

	// 1. Three waits. The question's continuation sleeps, so the second
	// kill lands before it ends.
	qSid := s.create()
	qA := s.prompt(qSid, "/ask Which city do you live in?\n/sleep 3s\nThanks for telling me.")
	var created struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"permissions": []map[string]string{
		{"action": "kv_put", "resource": "kv:secret*", "decision": "ask"}}}}, http.StatusCreated, &created)
	pSid := created.ID
	pA := s.prompt(pSid, `/tool kv_put {"key":"secret-1","value":"42"}`)
	tSid := s.create()
	tA := s.prompt(tSid, "/task /ask Which colour?\nThanks, child.")
	child := tSid + ".1"
	for _, sid := range []string{qSid, pSid, tSid, child} {
		waitParked(s, sid)
	}

	// 2. Each waits with its blocker listed.
	qs := questionIDs(s, qSid)
	require.Len(t, qs, 1)
	qid := qs[0]
	ps := s.permissions(pSid)
	require.Len(t, ps, 1)
	rid := ps[0].ID
	assert.Equal(t, []string{"kv:secret-1"}, ps[0].Request.Resources)
	cqs := questionIDs(s, child)
	require.Len(t, cqs, 1)
	cqid := cqs[0]
	assert.Equal(t, []string{cqid}, questionIDs(s, tSid), "the child's question is on the root's tree-wide list")
	rootBlockers := s.blockers(tSid)
	require.Len(t, rootBlockers.Blockers, 1)
	tid := rootBlockers.Blockers[0].ID
	waits := func() {
		t.Helper()
		requireWaitingOn(t, s, qSid, qid, "question")
		requireWaitingOn(t, s, pSid, rid, "permission")
		requireWaitingOn(t, s, tSid, tid, "task")
		requireWaitingOn(t, s, child, cqid, "question")
		assert.Equal(t, []string{qid}, questionIDs(s, qSid))
		assert.Equal(t, []string{rid}, []string{s.permissions(pSid)[0].ID})
		assert.Equal(t, []string{cqid}, questionIDs(s, tSid))
		var tree struct {
			Questions []struct {
				ID        string `json:"id"`
				SessionID string `json:"session_id"`
			} `json:"questions"`
		}
		s.do("GET", "/v1/sessions/"+tSid+"/questions", nil, http.StatusOK, &tree)
		require.Len(t, tree.Questions, 1)
		assert.Equal(t, child, tree.Questions[0].SessionID, "the root lists its child's question as the child's")
		for _, sid := range []string{qSid, pSid, tSid, child} {
			log := s.readLog(sid, s.snapshot(sid).Cursor)
			for _, typ := range []string{typeQuestionAnswered, typeQuestionCancelled, typePermissionApproved, typePermissionRejected, typeTaskResolved, typeSucceeded, typeInterrupted} {
				assert.Zero(t, countType(log, typ), "session %s: nothing resolved or ended before a reply:%s", sid, describe(log))
			}
		}
		for _, path := range []string{"/v1/sessions/" + qSid + "/questions", "/v1/sessions/" + pSid + "/permissions", "/v1/sessions/" + tSid + "/questions"} {
			bob.do("GET", path, nil, http.StatusNotFound, nil)
		}
	}
	waits()

	// 3. A kill while all three wait: the same ids, still waiting.
	w.restart(t)
	waits()

	// 4a. The permission, approved once: kv_put runs once, after it.
	pPath := "/v1/sessions/" + pSid + "/permissions/" + rid
	once := map[string]any{"reply": "once", "response_id": "p-reply-1"}
	bob.do("POST", pPath, once, http.StatusNotFound, nil)
	s.do("POST", pPath, once, http.StatusOK, nil)
	replyTwice(t, s, bob, pPath, once, map[string]any{"reply": "reject", "response_id": "p-reply-2"})
	st := s.follow(pSid, 0)
	st.until("the approved turn's end", endOf(pA))
	pB := s.prompt(pSid, `/tool kv_get {"key":"secret-1"}`)
	st.until("the kv_get turn's end", endOf(pB))
	st.close()
	sum := s.settle(pSid, pA, pB)
	sum.requireEnd(t, pA, typeSucceeded, "")
	sum.requireEnd(t, pB, typeSucceeded, "")
	assert.Equal(t, 1, terminals(sum.log, pA), "one end of the approved turn")
	assert.Equal(t, 1, sum.byType[typePermissionApproved])
	assert.Equal(t, 1, resolutions(sum.log), "one continuation")
	var settled []string
	for _, e := range sum.log {
		if e.Type == typeSettled {
			var p struct{ Outcome, Output string }
			require.NoError(t, json.Unmarshal(e.Data, &p))
			settled = append(settled, p.Outcome+": "+p.Output)
		}
	}
	assert.Equal(t, []string{"ok: stored secret-1", "ok: 42"}, settled, "kv_put ran once, after the approval; kv_get reads its value")

	// 4b. The child's question, answered through the root's path.
	cPath := "/v1/sessions/" + tSid + "/questions/" + cqid
	blue := map[string]any{"answers": [][]string{{"blue"}}, "response_id": "c-reply-1"}
	bob.do("POST", cPath, blue, http.StatusNotFound, nil)
	s.do("POST", cPath, blue, http.StatusOK, nil)
	replyTwice(t, s, bob, cPath, blue, map[string]any{"answers": [][]string{{"red"}}, "response_id": "c-reply-2"})
	st = s.follow(tSid, 0)
	st.until("the parent's end", endOf(tA))
	st.close()
	sum = s.settle(tSid, tA)
	ta := sum.requireEnd(t, tA, typeSucceeded, "")
	assert.Equal(t, 1, terminals(sum.log, tA), "one end of the parent's turn")
	assert.Equal(t, 1, sum.byType[typeTaskResolved])
	assert.Equal(t, 1, resolutions(sum.log), "the parent continues once")
	require.NotEmpty(t, ta.done)
	assert.Contains(t, ta.done[len(ta.done)-1].P.Text, "blue", "the child's answer, with the reply in it, is the task's result")
	csn := s.snapshot(child)
	assert.Equal(t, "idle", csn.Status)
	clog := s.readLog(child, csn.Cursor)
	ends := 0
	for _, e := range clog {
		if e.terminal() {
			ends++
			assert.Equal(t, typeSucceeded, e.Type, "the child's turn")
		}
	}
	assert.Equal(t, 1, ends, "the child's turn ends once:%s", describe(clog))
	assert.Equal(t, 1, countType(clog, typeQuestionAnswered))
	assert.Equal(t, 1, resolutions(clog), "the child continues once")

	// 5. The question, answered, and killed right after the 200: the
	// alarm finishes the continuation with no client request.
	qPath := "/v1/sessions/" + qSid + "/questions/" + qid
	lisbon := map[string]any{"answers": [][]string{{"Lisbon"}}, "response_id": "q-reply-1"}
	bob.do("POST", qPath, lisbon, http.StatusNotFound, nil)
	s.do("POST", qPath, lisbon, http.StatusOK, nil)
	w.restart(t)
	w.resumedByAlarm(t, qSid)
	replyTwice(t, s, bob, qPath, lisbon, map[string]any{"answers": [][]string{{"Porto"}}, "response_id": "q-reply-2"})
	sum = s.settle(qSid, qA)
	qa := sum.requireEnd(t, qA, typeSucceeded, "")
	assert.Equal(t, 1, terminals(sum.log, qA), "one end of the answered turn")
	assert.Equal(t, 1, sum.byType[typeQuestionAnswered])
	assert.Zero(t, sum.byType[typeQuestionCancelled], "neither kill cancelled the question")
	assert.Equal(t, 1, resolutions(sum.log), "one continuation:%s", describe(sum.log))
	assert.Len(t, qa.resumes, 1, "the alarm resumed the continuation once:%s", describe(sum.log))
	require.NotEmpty(t, qa.done)
	last := qa.done[len(qa.done)-1].P.Text
	assert.Contains(t, last, "Lisbon")
	assert.True(t, strings.HasSuffix(last, "You said: Thanks for telling me."), "%q", last)
	assert.Empty(t, questionIDs(s, qSid))
	assert.Empty(t, s.permissions(pSid))
	assert.Empty(t, questionIDs(s, tSid))
}
