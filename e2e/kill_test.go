package e2e

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSIGKILL kills the server with SIGKILL at a different point of a turn
// in each subtest, restarts it over the same data directory and checks the
// outcome through the API: the invariants of checkLog for every session,
// and the end each scenario expects. The subtests run one after another,
// in each mode of the server (eachMode).
func TestSIGKILL(t *testing.T) { eachMode(t, testSIGKILL) }

func testSIGKILL(t *testing.T) {
	before := kills.Load()
	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		{"AfterPrompt202", killAfterPrompt202},
		{"AfterInterrupt200", killAfterInterrupt200},
		{"MidStream", killMidStream},
		{"DuringSleepThenInterruptResumed", killDuringSleepThenInterrupt},
		{"TwoQueuedBehindRunning", killWithTwoQueued},
		{"AfterReplace202", killAfterReplace202},
		{"AfterCreate", killAfterCreate},
		{"AfterTerminalSeen", killAfterTerminal},
		{"DuringBoot", killDuringBoot},
		{"AfterFailTerminal", killAfterFail},
		{"TwiceMidTurnAfterTool", killTwiceMidTurn},
		{"DuringGracefulShutdown", killDuringShutdown},
		{"AfterInterrupt200RightAfterRestart", killAfterInterruptOnRestart},
		{"DuringPromptBurst", killDuringPromptBurst},
		{"AfterTextCheckpoint", killAfterCheckpoint},
		{"EveryResumeUntilTheBudget", killEveryResume},
		{"AfterDelete204", killAfterDelete},
		{"KeyedCreateAnswerLost", killKeyedCreateAnswerLost},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, sc.run)
	}
	n := kills.Load() - before
	t.Logf("%d SIGKILLs sent by %d scenarios", n, len(scenarios))
	if allScenarios() {
		assert.GreaterOrEqual(t, n, int64(10), "SIGKILLs sent")
	}
}

// allScenarios reports whether -run and -skip leave every scenario of
// TestSIGKILL in: only such a run is held to the count of SIGKILLs.
func allScenarios() bool {
	run, skip := flag.Lookup("test.run"), flag.Lookup("test.skip")
	return (run == nil || !strings.Contains(run.Value.String(), "/")) && (skip == nil || skip.Value.String() == "")
}

// killAfterPrompt202: SIGKILL as soon as the prompt is answered 202. The
// prompt must run after the restart (it was admitted with its claim before
// the answer), exactly once; re-sending it with the same client id is a
// duplicate of the first admission, and a different body is a conflict.
func killAfterPrompt202(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	req := promptReq{Text: "admitted then killed", ID: "client-prompt-1"}
	a := s.send(sid, req)
	require.False(t, a.Duplicate)
	s.kill()

	s = s.restart()
	again := s.send(sid, req)
	assert.True(t, again.Duplicate, "the same client id and body after the restart")
	assert.Equal(t, a.PromptID, again.PromptID)
	s.do("POST", "/v1/sessions/"+sid+"/prompt", promptReq{Text: "another body", ID: req.ID}, http.StatusConflict, nil)

	sum := s.settle(sid, a.PromptID)
	ta := sum.requireEnd(t, a.PromptID, typeSucceeded, "")
	assert.Equal(t, "You said: admitted then killed", ta.done[len(ta.done)-1].P.Text)
	assert.Equal(t, 2, sum.byType[typeAdmitted], "the prompt and the probe, no duplicate admission")
}

// killAfterInterrupt200: a turn sleeping in the model with a prompt queued
// behind it is interrupted; SIGKILL right after the 200. After the restart
// the turn is interrupted{user}, the queued prompt cancelled{user}, and
// neither runs again: no resume, no start.
func killAfterInterrupt200(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 30s\nheld open until interrupted")
	st.until("the held turn's step", forPrompt(typeStepStarted, a))
	b := s.prompt(sid, "queued behind the held turn")
	require.True(t, s.interrupt(sid), "interrupted")
	s.kill()

	s = s.restart()
	assert.False(t, s.interrupt(sid), "nothing left to interrupt after the restart")
	sum := s.settle(sid, a, b)
	ta := sum.requireEnd(t, a, typeInterrupted, "user")
	sum.requireEnd(t, b, typeCancelled, "user")
	assert.Len(t, ta.starts, 1)
	assert.Zero(t, sum.byType[typeResumed], "no execution.resumed after the interrupt; log:%s", describe(sum.log))
}

// killMidStream: SIGKILL after three words of a long answer streamed. The
// turn resumes once and its answer is complete, exactly once.
func killMidStream(t *testing.T) {
	var words []string
	for _, w := range strings.Fields("one two three four five six seven eight nine ten") {
		words = append(words, w, w+"-more")
	}
	text := strings.Join(words, " ")
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, text)
	st.until("three text deltas", nDeltas(3))
	s.kill()
	seen := st.log

	// The client reconnects with Last-Event-ID and gets the rest of the
	// log exactly once: with what it saw before the kill, the same events
	// as a read from 0.
	s = s.restart()
	rest := s.resumeStream(sid, st.last)
	rest.until("the resumed turn's end", endOf(a))
	sum := s.settle(sid, a)
	joined := append(append([]ev{}, seen...), rest.log...)
	require.LessOrEqual(t, len(joined), len(sum.log))
	for i, e := range joined {
		require.Equal(t, sum.log[i].ID, e.ID, "event %d seen across the reconnect", i+1)
	}
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1)
	assert.Equal(t, 1, ta.resumes[0].P.Attempt)
	require.Len(t, ta.done, 1, "one completed step: the cut one is not completed")
	assert.Equal(t, "You said: "+text, ta.done[0].P.Text)
	cut := false
	for _, e := range sum.log {
		cut = cut || (e.Type == typeStepCut && e.P.StepID == ta.steps[0].P.StepID)
	}
	assert.True(t, cut, "the killed step is marked cut; log:%s", describe(sum.log))
}

// killDuringSleepThenInterrupt: SIGKILL while the model sleeps (/sleep 30s).
// The restart resumes the turn, which sleeps again; interrupting the
// resumed execution ends the turn interrupted{user} for good.
func killDuringSleepThenInterrupt(t *testing.T) {
	s, sid, a, st := sleepingTurn(t, "/sleep 30s\nsleeping when killed")
	s.kill()

	s = s.restart()
	st = s.follow(sid, 0)
	st.until("the resumed execution", func(e ev) bool {
		return e.Type == typeStarted && e.P.PromptID == a && e.P.Cause == "resume"
	})
	require.True(t, s.interrupt(sid), "interrupted")
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeInterrupted, "user")
	assert.Len(t, ta.resumes, 1)
	assert.Len(t, ta.starts, 2)
}

// killWithTwoQueued: SIGKILL while one turn sleeps and two prompts wait
// behind it. After the restart the first resumes and all three succeed,
// once each, in order.
func killWithTwoQueued(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 1s\nfirst")
	st.until("the first turn's step", forPrompt(typeStepStarted, a))
	b := s.send(sid, promptReq{Text: "second", ID: "queued-2"}).PromptID
	c := s.prompt(sid, "third")
	sn := s.snapshot(sid)
	var states []string
	for _, p := range sn.Prompts {
		states = append(states, p.ID+":"+p.State)
	}
	require.Equal(t, []string{a + ":running", b + ":queued", c + ":queued"}, states, "prompts at the kill")
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a, b, c)
	for _, pid := range []string{a, b, c} {
		sum.requireEnd(t, pid, typeSucceeded, "")
	}
	assert.Len(t, sum.turn(t, a).resumes, 1)
	assert.Empty(t, sum.turn(t, b).resumes)
	assert.Empty(t, sum.turn(t, c).resumes)
}

// killAfterReplace202: a replace-mode prompt supersedes a sleeping turn and
// the prompt queued behind it; SIGKILL right after its 202. After the
// restart the old turn is interrupted{superseded} and never resumed, the
// queued prompt cancelled{superseded}, and the replacement succeeds once.
func killAfterReplace202(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 30s\nto be replaced")
	st.until("the old turn's step", forPrompt(typeStepStarted, a))
	b := s.prompt(sid, "queued, then superseded")
	r := s.send(sid, promptReq{Text: "the replacement", ID: "replace-1", Mode: "replace"}).PromptID
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a, b, r)
	ta := sum.requireEnd(t, a, typeInterrupted, "superseded")
	sum.requireEnd(t, b, typeCancelled, "superseded")
	tr := sum.requireEnd(t, r, typeSucceeded, "")
	assert.Empty(t, ta.resumes)
	assert.Len(t, ta.starts, 1)
	assert.Equal(t, "You said: the replacement", tr.done[len(tr.done)-1].P.Text)
}

// killAfterCreate: SIGKILL right after a session's 201, before any prompt.
// The session survives, idle, and takes prompts after the restart.
func killAfterCreate(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	s.kill()

	s = s.restart()
	sn := s.snapshot(sid)
	assert.Equal(t, "idle", sn.Status)
	assert.Equal(t, int64(1), sn.Cursor)
	assert.Equal(t, []string{sid}, s.listed())
	sum := s.settle(sid)
	assert.Equal(t, 1, sum.ends, "only the probe's turn")
}

// killAfterTerminal: SIGKILL right after the stream showed a turn's
// succeeded. Nothing of the turn runs again.
func killAfterTerminal(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "a short turn")
	end := st.until("the turn's end", endOf(a))
	require.Equal(t, typeSucceeded, end.Type)
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	assert.Len(t, ta.starts, 1)
	assert.Empty(t, ta.resumes)
	assert.Equal(t, end.Seq, int64(ta.endAt+1), "the terminal seen live is the one in the log")
}

// killDuringBoot: two sessions, each mid-turn, SIGKILL; then SIGKILL the
// restarted server as soon as it logs that it serves (its boot sweeps run
// in the background and may or may not have resumed the turns), then
// restart again. Each turn succeeds once; every resume is counted, from 1,
// without gaps.
func killDuringBoot(t *testing.T) {
	s := start(t, t.TempDir())
	sids := []string{s.create(), s.create()}
	var prompts []string
	for _, sid := range sids {
		st := s.follow(sid, 0)
		a := s.prompt(sid, "/sleep 400ms\nkilled during boot")
		st.until("the sleeping step", forPrompt(typeStepStarted, a))
		prompts = append(prompts, a)
	}
	s.kill()

	s = s.restart()
	s.kill() // at the serving line: the boot sweeps run in the background

	s = s.restart()
	for i, sid := range sids {
		sum := s.settle(sid, prompts[i])
		ta := sum.requireEnd(t, prompts[i], typeSucceeded, "")
		require.NotEmpty(t, ta.resumes)
		require.LessOrEqual(t, len(ta.resumes), 2)
		for i, r := range ta.resumes {
			assert.Equal(t, i+1, r.P.Attempt, "resume attempts count up without progress")
		}
	}
}

// killAfterFail: a /fail turn with a prompt queued behind it; SIGKILL right
// after the stream showed the failure. The failed turn is not retried or
// resumed; the queued prompt runs once.
func killAfterFail(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/fail boom")
	b := s.prompt(sid, "after the failure")
	end := st.until("the failed turn's end", endOf(a))
	require.Equal(t, typeFailed, end.Type)
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a, b)
	ta := sum.requireEnd(t, a, typeFailed, "model")
	assert.Contains(t, ta.end.P.Message, "boom")
	assert.Len(t, ta.starts, 1)
	assert.Empty(t, ta.resumes)
	sum.requireEnd(t, b, typeSucceeded, "")
}

// killTwiceMidTurn: a turn of two steps (a tool call, then an answer after
// /sleep). SIGKILL in the second step, restart, SIGKILL again in the
// resumed execution's step, restart. The turn succeeds once; the recorded
// tool step is never requested again and the tool call settles once; the
// two resumes count 1 and 2.
func killTwiceMidTurn(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/tool no_such_tool {\"n\": 1}\n/sleep 500ms\nafter the tool")
	st.until("the tool call's settlement", isType(typeToolSettled))
	st.until("the second step", forPrompt(typeStepStarted, a))
	s.kill()

	s = s.restart()
	st = s.follow(sid, 0)
	st.until("the resumed execution", func(e ev) bool {
		return e.Type == typeStarted && e.P.PromptID == a && e.P.Cause == "resume"
	})
	st.until("the resumed execution's step", forPrompt(typeStepStarted, a))
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 2)
	assert.Equal(t, 1, ta.resumes[0].P.Attempt)
	assert.Equal(t, 2, ta.resumes[1].P.Attempt)
	toolSteps := 0
	for _, d := range ta.done {
		if d.P.Finish == "tool_calls" {
			toolSteps++
		}
	}
	assert.Equal(t, 1, toolSteps, "the tool step is recorded once and never requested again")
	assert.Equal(t, 1, sum.byType[typeToolSettled])
	assert.Contains(t, ta.done[len(ta.done)-1].P.Text, "You said: after the tool")
}

// killDuringShutdown: SIGTERM while a turn sleeps, then SIGKILL as soon as
// the server logs that it is shutting down (the shutdown record may or may
// not have been written). After the restart the turn resumes once and
// succeeds once.
func killDuringShutdown(t *testing.T) {
	s, sid, a, _ := sleepingTurn(t, "/sleep 400ms\nkilled while stopping")
	s.signal(syscall.SIGTERM)
	s.waitLog("shutting down")
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	assert.Len(t, ta.resumes, 1)
	assert.LessOrEqual(t, len(ta.stops), 1)
}

// killAfterInterruptOnRestart: SIGKILL while a turn sleeps; restart and
// interrupt at once (the boot may or may not have resumed the turn yet);
// SIGKILL right after the 200; restart. The turn ends interrupted{user}
// and nothing of it runs after the interrupt.
func killAfterInterruptOnRestart(t *testing.T) {
	s, sid, a, _ := sleepingTurn(t, "/sleep 30s\ninterrupted after a restart")
	s.kill()

	s = s.restart()
	require.True(t, s.interrupt(sid), "interrupted")
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeInterrupted, "user")
	assert.LessOrEqual(t, len(ta.resumes), 1)
}

// killDuringPromptBurst: three clients post prompts as fast as they can;
// SIGKILL once six were answered 202. Every prompt answered 202 is in the
// log after the restart (prompts whose answer the kill cut may or may not
// be) and every admitted prompt succeeds once, in admission order.
func killDuringPromptBurst(t *testing.T) {
	s := start(t, t.TempDir())
	sid := s.create()
	var (
		mu       sync.Mutex
		accepted []string
		refused  []error
	)
	enough := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := promptReq{Text: fmt.Sprintf("burst %d %d", g, i)}
				if g == 0 {
					p.ID = fmt.Sprintf("burst-%d", i)
				}
				a, err := s.try(sid, p)
				mu.Lock()
				var status *statusError
				switch {
				case errors.As(err, &status):
					refused = append(refused, err)
				case err == nil:
					accepted = append(accepted, a.PromptID)
					if len(accepted) == 6 {
						close(enough)
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(waitTimeout):
		t.Fatal("six prompts were not answered 202")
	}
	s.kill()
	wg.Wait()
	require.Empty(t, refused, "prompts refused while the server ran")

	s = s.restart()
	sum := s.settle(sid, accepted...)
	for _, pid := range sum.order {
		sum.requireEnd(t, pid, typeSucceeded, "")
	}
	t.Logf("%d prompts answered 202 before the kill, %d admitted", len(accepted), len(sum.order)-1)
}

// killAfterCheckpoint: a long answer streams past its first text
// checkpoint (one a second); SIGKILL right after the stream showed it. The
// killed step is cut keeping exactly the checkpointed text, a prefix of the
// answer, and the resumed turn completes the whole answer once.
func killAfterCheckpoint(t *testing.T) {
	words := make([]string, 90)
	for i := range words {
		words[i] = fmt.Sprintf("word%02d", i)
	}
	text := strings.Join(words, " ")
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, text)
	cp := st.until("a text checkpoint", isType(typeCheckpoint))
	s.kill()

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1)
	first := ta.steps[0].P.StepID
	require.Equal(t, first, cp.P.StepID)
	var kept strings.Builder
	var cut *ev
	for _, e := range sum.log {
		switch {
		case e.Type == typeCheckpoint && e.P.StepID == first:
			assert.Equal(t, kept.Len(), e.P.Offset, "checkpoint offsets follow each other")
			kept.WriteString(e.P.Text)
		case e.Type == typeStepCut && e.P.StepID == first:
			cut = &e
		}
	}
	require.NotNil(t, cut, "the killed step is cut; log:%s", describe(sum.log))
	assert.Equal(t, kept.String(), cut.P.Text, "the cut step keeps its checkpointed text")
	assert.NotEmpty(t, cut.P.Text)
	assert.True(t, strings.HasPrefix("You said: "+text, cut.P.Text), "the kept text %q is a prefix of the answer", cut.P.Text)
	require.Len(t, ta.done, 1)
	assert.Equal(t, "You said: "+text, ta.done[0].P.Text)
}

// killEveryResume: a turn that never makes progress (it sleeps 30 s before
// its first word) is killed mid-turn, then after every resume, eleven
// SIGKILLs in all. Resumes 1 to 10 run; the boot after the tenth counts
// the eleventh resume and fails the turn failed{aborted} instead of
// running it (DESIGN §6.6, default budget 10).
func killEveryResume(t *testing.T) {
	const budget = 10
	s := start(t, t.TempDir())
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 30s\nnever gets to answer")
	st.until("the first step", forPrompt(typeStepStarted, a))
	s.kill()
	for attempt := 1; attempt <= budget; attempt++ {
		s = s.restart()
		st = s.follow(sid, 0)
		st.until(fmt.Sprintf("resume %d", attempt), func(e ev) bool {
			return e.Type == typeResumed && e.P.PromptID == a && e.P.Attempt == attempt
		})
		st.until(fmt.Sprintf("the step of resume %d", attempt), forPrompt(typeStepStarted, a))
		s.kill()
	}

	s = s.restart()
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeFailed, "aborted")
	require.Len(t, ta.resumes, budget+1)
	for i, r := range ta.resumes {
		assert.Equal(t, i+1, r.P.Attempt)
	}
	assert.Len(t, ta.starts, budget+1, "the first execution and resumes 1 to 10; not the 11th")
}

// killAfterDelete: two sessions mid-turn; one is deleted (204) and SIGKILL
// follows at once. After the restart the deleted session is gone for good
// (404 everywhere, not listed, its turn not resumed), and the other
// session's turn resumes and succeeds.
func killAfterDelete(t *testing.T) {
	s := start(t, t.TempDir())
	gone, kept := s.create(), s.create()
	var prompts []string
	for _, sid := range []string{gone, kept} {
		st := s.follow(sid, 0)
		a := s.prompt(sid, "/sleep 400ms\na turn when its session is deleted")
		st.until("the sleeping step", forPrompt(typeStepStarted, a))
		prompts = append(prompts, a)
	}
	s.do("DELETE", "/v1/sessions/"+gone, nil, http.StatusNoContent, nil)
	s.kill()

	s = s.restart()
	s.do("GET", "/v1/sessions/"+gone, nil, http.StatusNotFound, nil)
	s.do("GET", "/v1/sessions/"+gone+"/events", nil, http.StatusNotFound, nil)
	s.do("POST", "/v1/sessions/"+gone+"/prompt", promptReq{Text: "to a deleted session"}, http.StatusNotFound, nil)
	s.do("POST", "/v1/sessions/"+gone+"/interrupt", nil, http.StatusNotFound, nil)
	assert.Equal(t, []string{kept}, s.listed())
	sum := s.settle(kept, prompts[1])
	ta := sum.requireEnd(t, prompts[1], typeSucceeded, "")
	assert.Len(t, ta.resumes, 1)
}

// killKeyedCreateAnswerLost: creates with an Idempotency-Key whose answers
// the client never gets, then SIGKILL, then the retries. One create's
// connection is dropped as soon as the request is written, so the kill
// finds it done or not (either is a case of the promise); the other's 201
// is read and treated as lost. After the restart each retry with its key
// is answered 201 with one id, again and again, and the list holds
// exactly one tree per key: the retries made none.
func killKeyedCreateAnswerLost(t *testing.T) {
	s := start(t, t.TempDir())
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: dropped\r\n"+
		"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
	require.NoError(t, err)
	require.NoError(t, conn.Close()) // the answer, if any, is lost
	lost := s.createKeyed("read-then-lost", `{}`, http.StatusCreated)
	s.kill()

	s = s.restart()
	dropped := s.createKeyed("dropped", `{}`, http.StatusCreated)
	assert.Equal(t, dropped, s.createKeyed("dropped", `{}`, http.StatusCreated), "a second retry")
	assert.Equal(t, lost, s.createKeyed("read-then-lost", `{}`, http.StatusCreated), "the retry is answered the first create's id")
	assert.ElementsMatch(t, []string{dropped, lost}, s.listed(), "one tree per key")
	assert.Equal(t, "idle", s.snapshot(lost).Status)
}
