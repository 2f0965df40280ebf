package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Durable questions, permission requests and sub-agents on the Durable
// Object host (wrangler dev), SIGKILLed at the moments the local server's
// tests cover and TestWorkerdDurableWaits does not: a reject that must
// never run a non-idempotent webhook, an answer racing an interrupt, a
// sub-agent streaming at the kill, a tree deleted while its child works,
// and a child parked on a question, answered or interrupted. The model is
// the offline one; the webhook tool posts to the ledger of
// TestWorkerdWebhookLedger, in this process.

// Event types of tool calls.
const typeToolExecuting = "session.tool.executing@1"

// startLedgerWorkerd starts workerd with the offline model and the ledger
// webhook tool, whose configured permission is permission (allow, ask).
// ended hears the webhook-id of every delivery whose request has ended
// (answered, or held and then cut by its client).
func startLedgerWorkerd(t *testing.T, permission string) (w *workerd, l *ledger, ended chan string) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ledgerSecret, "whsec_"))
	require.NoError(t, err)
	l = &ledger{key: key, held: make(chan string, 8), arrivals: map[string]int{}, recorded: map[string]int{}, bodies: map[string]string{}}
	ended = make(chan string, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		l.ServeHTTP(rw, r)
		ended <- r.Header.Get("webhook-id")
	})) // loopback
	t.Cleanup(srv.Close)
	// The longest timeout: a held delivery's request ends only when the
	// object cuts it, never by the tool's own deadline within a test.
	tools := `{"webhook_tools":[{"name":"` + ledgerTool + `","description":"Record an entry in the ledger.",` +
		`"url":"` + srv.URL + `/hook","idempotent":false,"permission":"` + permission + `","timeout":"10m","secret_env":"LEDGER_SECRET"}]}`
	w = startWorkerdWith(t, "", "REVENANT_TOKENS:"+frontTokens, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay,
		"REVENANT_TOOLS:"+tools, "LEDGER_SECRET:"+ledgerSecret)
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		assert.Zero(t, l.unverified, "every delivery was signed")
		for id, n := range l.arrivals {
			assert.Equal(t, 1, n, "webhook-id %s arrived at most once", id)
		}
	})
	return w, l, ended
}

// ledgerCall is the offline model's directive calling the ledger tool with
// entry (plain words: the ledger finds a delivery by its body).
func ledgerCall(entry string) string {
	return `/tool ` + ledgerTool + ` {"entry":"` + entry + `"}`
}

// requireNoDelivery checks the ledger never saw a delivery for entry.
func requireNoDelivery(t *testing.T, l *ledger, entry string) {
	t.Helper()
	ids, arrivals, _ := l.deliveries(entry)
	assert.Empty(t, ids, "no webhook delivery for %q", entry)
	assert.Zero(t, arrivals, "no webhook delivery for %q", entry)
}

// settlements lists the tool settlements of a log as "outcome: output".
func settlements(t *testing.T, log []ev) []string {
	t.Helper()
	var out []string
	for _, e := range log {
		if e.Type == typeToolSettled {
			var p struct{ Outcome, Output string }
			require.NoError(t, json.Unmarshal(e.Data, &p))
			out = append(out, p.Outcome+": "+p.Output)
		}
	}
	return out
}

// post sends a JSON body and returns the status and the answer, whatever
// the status.
func post(t *testing.T, s *server, path string, body any) (int, []byte) {
	t.Helper()
	code, raw, err := tryPost(s, path, body)
	require.NoError(t, err, "POST %s", path)
	return code, raw
}

// tryPost is post for a goroutine of the test's own: it fails nothing.
func tryPost(s *server, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// TestWorkerdPermissionRepliesAcrossKill: three calls of a non-idempotent
// webhook whose rule asks, parked in one wrangler run, SIGKILLed while
// they wait, then replied to on the same request ids: a reject (the turn
// ends interrupted{user}), a reject with a message (the turn goes on) and
// an approval. The kill after the two rejects comes right after their 200s. The
// ledger never sees a rejected call, not before the kill, not after it,
// not from the continuation the alarm resumes; it sees the approved one
// once. A fourth session's own rule denies the tool: its call is
// declined without asking, through the kills, and never delivered.
func TestWorkerdPermissionRepliesAcrossKill(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "ask")
	s := w.as(t, "a-token")

	type waiter struct{ sid, prompt, entry, rid string }
	rej := &waiter{entry: "perm-reject"}
	msg := &waiter{entry: "perm-reject-message"}
	ok := &waiter{entry: "perm-once"}
	rej.sid, msg.sid, ok.sid = s.create(), s.create(), s.create()
	// A session whose own rule denies the tool: its call never parks
	// and never runs.
	var created struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"permissions": []map[string]string{
		{"action": ledgerTool, "resource": "*", "decision": "deny"}}}}, http.StatusCreated, &created)
	denied := &waiter{sid: created.ID, entry: "perm-denied-by-rule"}
	denied.prompt = s.prompt(denied.sid, ledgerCall(denied.entry)+"\nafter the denial")
	rej.prompt = s.prompt(rej.sid, ledgerCall(rej.entry))
	// The continuation sleeps, so the kill after the reply lands in it.
	msg.prompt = s.prompt(msg.sid, ledgerCall(msg.entry)+"\n/sleep 3s\nafter the decline")
	ok.prompt = s.prompt(ok.sid, ledgerCall(ok.entry)+"\nafter the approval")
	all := []*waiter{rej, msg, ok}
	for _, c := range all {
		waitParked(s, c.sid)
		ps := s.permissions(c.sid)
		require.Len(t, ps, 1, "session %s", c.sid)
		assert.Equal(t, ledgerTool, ps[0].Request.Action)
		c.rid = ps[0].ID
	}

	dst := s.follow(denied.sid, 0)
	dst.until("the denied call's turn to end", endOf(denied.prompt))
	dst.close()

	// A kill while the three wait: the same requests, still waiting.
	w.restart(t)
	for _, c := range all {
		requireWaitingOn(t, s, c.sid, c.rid, "permission")
		requireNoDelivery(t, l, c.entry)
	}

	// The approval: the webhook runs once, after it.
	path := func(c *waiter) string { return "/v1/sessions/" + c.sid + "/permissions/" + c.rid }
	s.do("POST", path(ok), map[string]any{"reply": "once", "response_id": "ok-1"}, http.StatusOK, nil)
	st := s.follow(ok.sid, 0)
	st.until("the approved turn's end", endOf(ok.prompt))
	st.close()

	// The rejects, killed right after their 200s.
	s.do("POST", path(rej), map[string]any{"reply": "reject", "response_id": "rej-1"}, http.StatusOK, nil)
	rejectWithMessage := map[string]any{"reply": "reject", "message": "not now", "response_id": "msg-1"}
	s.do("POST", path(msg), rejectWithMessage, http.StatusOK, nil)
	w.restart(t)
	w.resumedByAlarm(t, msg.sid)

	sum := s.settle(rej.sid, rej.prompt)
	tr := sum.requireEnd(t, rej.prompt, typeInterrupted, "user")
	assert.Len(t, tr.starts, 1, "the rejected turn never started again:%s", describe(sum.log))
	assert.Empty(t, tr.resumes)
	assert.Equal(t, 1, sum.byType[typePermissionRejected])
	assert.Zero(t, sum.byType[typeToolExecuting], "the rejected call never began")
	assert.Equal(t, []string{"declined: The user declined this call; it did not run."}, settlements(t, sum.log))
	requireNoDelivery(t, l, rej.entry)

	sum = s.settle(msg.sid, msg.prompt)
	tr = sum.requireEnd(t, msg.prompt, typeSucceeded, "")
	assert.Len(t, tr.resumes, 1, "the continuation was resumed once, by the alarm:%s", describe(sum.log))
	assert.Equal(t, 1, resolutions(sum.log), "one continuation")
	assert.Zero(t, sum.byType[typeToolExecuting], "the rejected call never began")
	assert.Equal(t, []string{"declined: The user declined this call; it did not run. The user said: not now"}, settlements(t, sum.log))
	require.NotEmpty(t, tr.done)
	assert.True(t, strings.HasSuffix(tr.done[len(tr.done)-1].P.Text, "You said: after the decline"), "%q", tr.done[len(tr.done)-1].P.Text)
	requireNoDelivery(t, l, msg.entry)

	sum = s.settle(ok.sid, ok.prompt)
	sum.requireEnd(t, ok.prompt, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typeToolExecuting], "the approved call began once")
	require.Len(t, settlements(t, sum.log), 1)
	assert.Contains(t, settlements(t, sum.log)[0], `ok: {"recorded":`)
	ids, arrivals, recorded := l.deliveries(ok.entry)
	assert.Len(t, ids, 1)
	assert.Equal(t, 1, arrivals, "the approved call reached the ledger once")
	assert.Equal(t, 1, recorded)

	// First response wins, across both kills.
	for _, c := range []struct {
		w    *waiter
		won  map[string]any
		then map[string]any
	}{
		{rej, map[string]any{"reply": "reject", "response_id": "rej-1"}, map[string]any{"reply": "once", "response_id": "rej-2"}},
		{msg, rejectWithMessage, map[string]any{"reply": "once", "response_id": "msg-2"}},
		{ok, map[string]any{"reply": "once", "response_id": "ok-1"}, map[string]any{"reply": "reject", "response_id": "ok-2"}},
	} {
		replyTwice(t, s, w.as(t, "b-token"), path(c.w), c.won, c.then)
	}
	requireNoDelivery(t, l, rej.entry)
	requireNoDelivery(t, l, msg.entry)

	sum = s.settle(denied.sid, denied.prompt)
	tr = sum.requireEnd(t, denied.prompt, typeSucceeded, "")
	assert.Empty(t, tr.resumes)
	assert.Zero(t, sum.byType[typeParked], "a denied call asks nobody")
	assert.Zero(t, sum.byType[typeToolExecuting], "the denied call never began")
	require.Len(t, settlements(t, sum.log), 1)
	assert.True(t, strings.HasPrefix(settlements(t, sum.log)[0], "declined: "), "%q", settlements(t, sum.log)[0])
	requireNoDelivery(t, l, denied.entry)
}

// TestWorkerdAnswerRacesInterrupt: turns parked on a question whose
// continuation calls a non-idempotent webhook; the answer and an
// interrupt are sent at the same moment, in both orders, then workerd is
// SIGKILLed and restarted. Half the questions are a foreground child's,
// answered on its root's path while the root is interrupted. Either the
// interrupt won (the answer is 409 with the cancellation as winner,
// nothing continued) or the answer did (the interrupt then stopped the
// continuation); either way each turn ends once, nothing of it happens
// after its end, an interrupted turn is never revived, and the webhook was
// delivered at most once and only after its call was recorded executing.
func TestWorkerdAnswerRacesInterrupt(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "allow")
	s := w.as(t, "a-token")
	const n = 12
	type racer struct {
		sid, asker, prompt, qid, entry string // asker: the session whose question it is
		answer                         int
		answerBody                     []byte
		interrupted                    bool
	}
	racers := make([]*racer, n)
	for i := range racers {
		r := &racer{entry: fmt.Sprintf("race-%d", i)}
		r.sid = s.create()
		r.asker = r.sid
		ask := "/ask Go ahead?"
		if i >= n/2 {
			r.asker, ask = r.sid+".1", "/task /ask Go ahead?"
		}
		r.prompt = s.prompt(r.sid, ask+"\n"+ledgerCall(r.entry)+"\n/sleep 2s\ndone")
		racers[i] = r
	}
	for _, r := range racers {
		waitParked(s, r.asker)
		qs := questionIDs(s, r.sid)
		require.Len(t, qs, 1)
		r.qid = qs[0]
	}

	answers, interrupted := raceInterrupts(t, s, len(racers), func(i int) (string, string, any) {
		r := racers[i]
		return r.sid, "/v1/sessions/" + r.sid + "/questions/" + r.qid,
			map[string]any{"answers": [][]string{{"yes"}}, "response_id": "race"}
	})
	for i, r := range racers {
		r.answer, r.answerBody, r.interrupted = answers[i].code, answers[i].body, interrupted[i]
	}

	w.restart(t)
	answered := 0
	for _, r := range racers {
		sum := s.settle(r.sid, r.prompt)
		tr := sum.turn(t, r.prompt)
		require.NotNil(t, tr.end)
		assert.Empty(t, tr.resumes, "no kill fell inside the turn:%s", describe(sum.log))
		qlog, qturn := sum.log, r.prompt // the asking session's log and turn
		if r.asker != r.sid {
			csum := s.settle(r.asker)
			qlog, qturn = csum.log, taskPrompt(csum)
			require.NotEmpty(t, qturn, "the child's task prompt:%s", describe(csum.log))
			ct := csum.turn(t, qturn)
			require.NotNil(t, ct.end)
			assert.Empty(t, ct.resumes, "no kill fell inside the child's turn:%s", describe(csum.log))
			if tr.end.Type == typeInterrupted {
				csum.requireEnd(t, qturn, typeInterrupted, "user")
			}
		}
		ids, arrivals, _ := l.deliveries(r.entry)
		switch r.answer {
		case http.StatusConflict:
			requireLostToInterrupt(t, r.answerBody, r.interrupted)
			sum.requireEnd(t, r.prompt, typeInterrupted, "user")
			assert.Zero(t, countType(qlog, typeQuestionAnswered))
			assert.Equal(t, 1, countType(qlog, typeQuestionCancelled))
			assert.Zero(t, resolutions(qlog), "nothing continued:%s", describe(qlog))
			assert.Zero(t, resolutions(sum.log), "nothing continued:%s", describe(sum.log))
			assert.Empty(t, ids, "no webhook call")
		case http.StatusOK:
			answered++
			assert.Equal(t, 1, countType(qlog, typeQuestionAnswered))
			assert.Zero(t, countType(qlog, typeQuestionCancelled))
			assert.LessOrEqual(t, resolutions(qlog), 1, "at most one continuation:%s", describe(qlog))
			assert.LessOrEqual(t, resolutions(sum.log), 1, "at most one continuation:%s", describe(sum.log))
			if tr.end.Type == typeSucceeded {
				assert.False(t, r.interrupted, "an interrupt that answered true ended the turn:%s", describe(sum.log))
			} else {
				sum.requireEnd(t, r.prompt, typeInterrupted, "user")
			}
			executing := sum.byType[typeToolExecuting]
			assert.LessOrEqual(t, executing, 1)
			assert.LessOrEqual(t, arrivals, executing, "a delivery only for a call recorded executing:%s", describe(sum.log))
			for _, settled := range settlements(t, sum.log) {
				if strings.HasPrefix(settled, `ok: {"recorded":`) {
					assert.Equal(t, 1, arrivals, "the webhook's settled delivery:%s", describe(sum.log))
				}
			}
		default:
			t.Fatalf("the answer of %s: %d %s", r.sid, r.answer, r.answerBody)
		}
		assert.Equal(t, 1, terminals(sum.log, r.prompt))
		assert.Equal(t, 1, terminals(qlog, qturn))
		assert.Empty(t, questionIDs(s, r.sid))
	}
	t.Logf("%d of %d answers won the race", answered, n)
}

// TestWorkerdSubagentKilledMidChild: a sub-agent streams its answer when
// workerd is SIGKILLed; with no client request, the alarm resumes the
// child once. A foreground child's answer reaches its parent's waiting
// call once and the parent's turn ends once; a background child's
// completion notice is admitted to the parent once, and its turn runs
// once.
func TestWorkerdSubagentKilledMidChild(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerd(t)
	for _, background := range []bool{false, true} {
		name := "foreground"
		directive := "/task "
		if background {
			name, directive = "background", "/task --background "
		}
		t.Run(name, func(t *testing.T) {
			s := w.client(t)
			sid := s.create()
			child := sid + ".1"
			a := s.prompt(sid, directive+childWords())
			seen := untilChildRuns(s, sid, "the child's answer to stream", nDeltas(20))
			checkpointed := ""
			for _, e := range seen {
				if e.Type == typeCheckpoint {
					checkpointed += e.P.Text
				}
			}
			w.restart(t)
			w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, waitTimeout)
			w.waitLog(t, `msg="alarm handled" tree=`+sid+` idle=true`, waitTimeout)

			sum := s.settle(sid, a)
			ta := sum.requireEnd(t, a, typeSucceeded, "")
			assert.Equal(t, 1, sum.byType[typeJobStarted], "one child started:%s", describe(sum.log))
			assert.Equal(t, 1, sum.byType[typeJobEnded], "its job ended once")
			assert.Equal(t, 1, countType(sum.log, typeToolSettled), "the task call settled once")
			assert.Equal(t, 1, terminals(sum.log, a), "the parent's turn ended once")
			require.NotEmpty(t, ta.done)
			var notices []string
			for _, pid := range sum.order {
				if strings.HasPrefix(sum.log[sum.turns[pid].admitted].P.ClientID, "notice-") {
					notices = append(notices, pid)
				}
			}
			final := ta.done[len(ta.done)-1].P.Text
			if background {
				require.Len(t, notices, 1, "the child's notice was admitted once:%s", describe(sum.log))
				nt := sum.requireEnd(t, notices[0], typeSucceeded, "")
				require.NotEmpty(t, nt.done)
				assert.Contains(t, sum.log[nt.admitted].P.Text, "w149", "the notice carries the child's whole answer")
				assert.Equal(t, 1, terminals(sum.log, notices[0]), "the notice's turn ended once")
			} else {
				assert.Empty(t, notices)
				assert.Contains(t, final, "w149", "the child's whole answer is the task's result: %q", final)
				assert.Zero(t, sum.byType[typeResumed], "the parent waited parked: nothing of it resumed:%s", describe(sum.log))
			}

			csum := s.settle(child)
			task := taskPrompt(csum)
			require.NotEmpty(t, task, "the child's task prompt:%s", describe(csum.log))
			tc := csum.requireEnd(t, task, typeSucceeded, "")
			assert.Len(t, tc.resumes, 1, "the child's turn resumed once:%s", describe(csum.log))
			assert.Equal(t, 1, terminals(csum.log, task), "the child's turn ended once")
			if checkpointed != "" {
				cut := ""
				for _, e := range csum.log {
					if e.Type == typeStepCut {
						cut = e.P.Text
					}
				}
				assert.True(t, strings.HasPrefix(cut, checkpointed), "the cut step keeps its checkpoints: cut %q, checkpoints %q", cut, checkpointed)
			}
		})
	}
}

// TestWorkerdDeleteWhileChildRuns deletes trees while a child works: one
// child's non-idempotent webhook call is held open by the ledger, another
// child streams its answer. The delete answers 204 once the tree's
// executions stopped (the held delivery's request is cut), both sessions
// are gone, and after a SIGKILL and a restart nothing of the trees is
// left: no table, no alarm, no second delivery.
func TestWorkerdDeleteWhileChildRuns(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, ended := startLedgerWorkerd(t, "allow")
	s := w.as(t, "a-token")

	webhook := s.create()
	s.prompt(webhook, "/task "+ledgerCall(holdBefore+" delete-me"))
	var held string
	select {
	case held = <-l.held:
	case <-time.After(waitTimeout):
		t.Fatalf("the child's webhook call never arrived:\n%s", w.logs)
	}
	streaming := s.create()
	s.prompt(streaming, "/task "+childWords())
	untilChildRuns(s, streaming, "the child's answer to stream", nDeltas(5))

	for _, sid := range []string{webhook, streaming} {
		s.do("DELETE", "/v1/sessions/"+sid, nil, http.StatusNoContent, nil)
	}
	select {
	case id := <-ended:
		assert.Equal(t, held, id, "the held delivery's request was cut")
	case <-time.After(waitTimeout):
		t.Fatalf("the held delivery's request was never cut by the delete")
	}
	requireGone := func() {
		t.Helper()
		for _, sid := range []string{webhook, streaming} {
			for _, id := range []string{sid, sid + ".1"} {
				code, body := frontRaw(t, s, "GET", "/v1/sessions/"+id)
				assert.Equal(t, http.StatusNotFound, code, "%s: %s", id, body)
			}
			assert.NotContains(t, s.listed(), sid)
		}
	}
	requireGone()

	w.kill(t)
	for path := range w.treeState(t) {
		if !strings.HasSuffix(path, ".sqlite") || filepath.Base(path) == "metadata.sqlite" {
			continue
		}
		tables := tablesOf(t, path)
		assert.True(t, len(tables) == 0 || len(tables) == 1 && tables[0] == "__miniflare_do_name",
			"a deleted tree's database is empty, with no alarm: %s: %v", filepath.Base(path), tables)
	}
	w.start(t)
	requireGone()
	ids, arrivals, recorded := l.deliveries("delete-me")
	assert.Len(t, ids, 1)
	assert.Equal(t, 1, arrivals, "the held call was not sent again")
	assert.Zero(t, recorded)
}

// TestWorkerdParkedChild: a root's foreground child waits on a question.
//
//   - Answered through the root's path and SIGKILLed right after the 200:
//     with no client request, the alarm finishes what the kill cut (the
//     child's continuation or the root's, which sleeps), the child's
//     answer reaches the root's call once and each turn ends once.
//   - The root interrupted, then SIGKILLed: the interrupt ended the
//     child's task turn and cancelled its question by its answer (the
//     question is no longer listed on either path, an answer afterwards
//     is 409 with the cancellation), and after the restart neither turn
//     continues.
func TestWorkerdParkedChild(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "allow")
	s := w.as(t, "a-token")
	parked := func(t *testing.T, text string) (sid, prompt, qid string) {
		sid = s.create()
		prompt = s.prompt(sid, "/task /ask Which colour?\n"+text)
		waitParked(s, sid)
		waitParked(s, sid+".1")
		qs := questionIDs(s, sid+".1")
		require.Len(t, qs, 1)
		return sid, prompt, qs[0]
	}

	t.Run("answered, then killed", func(t *testing.T) {
		sid, a, qid := parked(t, "/sleep 3s\nThanks, child.")
		child := sid + ".1"
		s.do("POST", "/v1/sessions/"+sid+"/questions/"+qid, map[string]any{"answers": [][]string{{"blue"}}, "response_id": "blue"}, http.StatusOK, nil)
		w.restart(t)
		w.resumedByAlarm(t, sid)

		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		assert.Equal(t, 1, terminals(sum.log, a), "the root's turn ended once")
		assert.Equal(t, 1, sum.byType[typeTaskResolved], "the child's answer reached the root's call once")
		assert.Equal(t, 1, resolutions(sum.log), "the root continued once:%s", describe(sum.log))
		require.NotEmpty(t, ta.done)
		last := ta.done[len(ta.done)-1].P.Text
		assert.Contains(t, last, "blue", "the child's answer, with the reply in it, is the task's result")
		assert.True(t, strings.HasSuffix(last, "You said: Thanks, child."), "%q", last)
		csum := s.settle(child)
		task := taskPrompt(csum)
		require.NotEmpty(t, task, "the child's task prompt:%s", describe(csum.log))
		csum.requireEnd(t, task, typeSucceeded, "")
		assert.Equal(t, 1, terminals(csum.log, task), "the child's turn ended once")
		assert.Equal(t, 1, countType(csum.log, typeQuestionAnswered))
		assert.Equal(t, 1, resolutions(csum.log), "the child continued once")
	})

	t.Run("parent interrupted, then killed", func(t *testing.T) {
		sid, a, qid := parked(t, ledgerCall("after-the-child"))
		child := sid + ".1"
		require.True(t, s.interrupt(sid))
		assert.Empty(t, questionIDs(s, sid), "nothing pending in the tree once the interrupt answered")
		assert.Empty(t, questionIDs(s, child))
		w.restart(t)

		code, body := post(t, s, "/v1/sessions/"+sid+"/questions/"+qid, map[string]any{"answers": [][]string{{"blue"}}, "response_id": "late"})
		require.Equal(t, http.StatusConflict, code, "%s", body)
		assert.Contains(t, string(body), `"state":"cancelled"`)

		sum := s.settle(sid, a)
		sum.requireEnd(t, a, typeInterrupted, "user")
		assert.Zero(t, resolutions(sum.log), "the root never continued:%s", describe(sum.log))
		requireNoDelivery(t, l, "after-the-child")
		csum := s.settle(child)
		task := taskPrompt(csum)
		require.NotEmpty(t, task, "the child's task prompt:%s", describe(csum.log))
		tc := csum.requireEnd(t, task, typeInterrupted, "user")
		assert.Len(t, tc.starts, 1, "the child's task turn never started again:%s", describe(csum.log))
		assert.Zero(t, resolutions(csum.log))
		assert.Equal(t, 1, countType(csum.log, typeQuestionCancelled))
		assert.Zero(t, countType(csum.log, typeQuestionAnswered))
	})
}

// raced is one request's answer in raceInterrupts.
type raced struct {
	code int
	body []byte
}

// raceInterrupts sends n races at once: for each i, the reply that
// reply(i) names (its session, path and body) and an interrupt of that
// session, together (the reply started first for even i, the interrupt
// for odd). It returns each reply's answer and whether each interrupt
// interrupted a turn; every interrupt must answer 200.
func raceInterrupts(t *testing.T, s *server, n int, reply func(i int) (sid, path string, body any)) ([]raced, []bool) {
	t.Helper()
	type sent struct {
		raced
		err error
	}
	replies, interrupts := make([]sent, n), make([]sent, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		sid, path, body := reply(i)
		answer := func() {
			a := &replies[i]
			a.code, a.body, a.err = tryPost(s, path, body)
		}
		interrupt := func() {
			in := &interrupts[i]
			in.code, in.body, in.err = tryPost(s, "/v1/sessions/"+sid+"/interrupt", nil)
		}
		first, second := answer, interrupt
		if i%2 == 1 {
			first, second = interrupt, answer
		}
		wg.Add(2)
		go func() { defer wg.Done(); <-start; first() }()
		go func() { defer wg.Done(); <-start; second() }()
	}
	close(start)
	wg.Wait()
	answers, interrupted := make([]raced, n), make([]bool, n)
	for i := range n {
		require.NoError(t, replies[i].err)
		require.NoError(t, interrupts[i].err)
		require.Equal(t, http.StatusOK, interrupts[i].code, "%s", interrupts[i].body)
		var out struct {
			Interrupted bool `json:"interrupted"`
		}
		require.NoError(t, json.Unmarshal(interrupts[i].body, &out))
		answers[i], interrupted[i] = replies[i].raced, out.Interrupted
	}
	return answers, interrupted
}

// requireLostToInterrupt checks a reply's 409 body names the interrupt that
// cancelled its blocker first, and that this interrupt found the turn.
func requireLostToInterrupt(t *testing.T, body []byte, interrupted bool) {
	t.Helper()
	var conflict struct {
		Winner struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"winner"`
	}
	require.NoError(t, json.Unmarshal(body, &conflict))
	assert.Equal(t, "cancelled", conflict.Winner.State, "%s", body)
	assert.Equal(t, "interrupt", conflict.Winner.Reason, "%s", body)
	assert.True(t, interrupted, "the interrupt found the parked turn")
}
