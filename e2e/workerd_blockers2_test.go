package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Three more durable paths of the Durable Object host under SIGKILL,
// beside those of workerd_blockers_test.go: a child killed inside a
// non-idempotent webhook call, a permission reply racing an interrupt,
// and an "always" reply across a kill.

// TestWorkerdChildKilledInWebhook: a foreground child's non-idempotent
// webhook call is held by the ledger when workerd is SIGKILLed. With no
// client request, the alarm finishes the tree: the call is never
// delivered again, the child's call settles once with an unknown outcome,
// and the child's answer reaches the parent's task call once.
func TestWorkerdChildKilledInWebhook(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "allow")
	s := w.as(t, "a-token")
	sid := s.create()
	child := sid + ".1"
	entry := holdBefore + " child-killed"
	a := s.prompt(sid, "/task "+ledgerCall(entry))
	select {
	case <-l.held:
	case <-time.After(waitTimeout):
		t.Fatalf("the child's webhook call never arrived:\n%s", w.logs)
	}
	w.restart(t)
	w.resumedByAlarm(t, sid)

	sum := s.settle(sid, a)
	sum.requireEnd(t, a, typeSucceeded, "")
	assert.Equal(t, 1, terminals(sum.log, a), "the parent's turn ended once")
	assert.Equal(t, 1, sum.byType[typeJobStarted], "one child started:%s", describe(sum.log))
	assert.Equal(t, 1, sum.byType[typeTaskResolved], "the child's answer reached the parent's call once:%s", describe(sum.log))
	assert.Equal(t, 1, countType(sum.log, typeToolSettled), "the task call settled once:%s", describe(sum.log))

	csum := s.settle(child)
	task := taskPrompt(csum)
	require.NotEmpty(t, task, "the child's task prompt:%s", describe(csum.log))
	tc := csum.requireEnd(t, task, typeSucceeded, "")
	assert.Len(t, tc.resumes, 1, "the child's turn resumed once:%s", describe(csum.log))
	assert.Equal(t, 1, terminals(csum.log, task), "the child's turn ended once")
	assert.Equal(t, 1, csum.byType[typeToolExecuting], "the webhook call began once:%s", describe(csum.log))
	settled := settlements(t, csum.log)
	require.Len(t, settled, 1, "the webhook call settled once:%s", describe(csum.log))
	assert.True(t, strings.HasPrefix(settled[0], "interrupted: "), "%q", settled[0])
	assert.Contains(t, settled[0], "The outcome of this call is unknown")

	ids, arrivals, recorded := l.deliveries(entry)
	assert.Len(t, ids, 1, "one webhook-id for the one call")
	assert.Equal(t, 1, arrivals, "the held call was not sent again")
	assert.Zero(t, recorded)
}

// TestWorkerdPermissionReplyRacesInterrupt: turns parked on a permission
// request for a non-idempotent webhook; the approval and an interrupt are
// sent at the same moment, in both orders, then workerd is SIGKILLed and
// restarted. Either the interrupt won (the reply is 409 with the
// cancellation as winner, the call never began, the ledger saw nothing)
// or the approval did (the webhook was delivered at most once, and only
// for a call recorded executing); either way each turn ends once and
// nothing of it comes back after the restart.
func TestWorkerdPermissionReplyRacesInterrupt(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "ask")
	s := w.as(t, "a-token")
	const n = 8
	type racer struct {
		sid, prompt, rid, entry string
		reply                   int
		replyBody               []byte
		interrupted             bool
	}
	racers := make([]*racer, n)
	for i := range racers {
		r := &racer{entry: fmt.Sprintf("perm-race-%d", i)}
		r.sid = s.create()
		r.prompt = s.prompt(r.sid, ledgerCall(r.entry)+"\n/sleep 2s\ndone")
		racers[i] = r
	}
	for _, r := range racers {
		waitParked(s, r.sid)
		ps := s.permissions(r.sid)
		require.Len(t, ps, 1, "session %s", r.sid)
		r.rid = ps[0].ID
	}

	replies, interrupted := raceInterrupts(t, s, len(racers), func(i int) (string, string, any) {
		r := racers[i]
		return r.sid, "/v1/sessions/" + r.sid + "/permissions/" + r.rid,
			map[string]any{"reply": "once", "response_id": "race"}
	})
	for i, r := range racers {
		r.reply, r.replyBody, r.interrupted = replies[i].code, replies[i].body, interrupted[i]
	}

	w.restart(t)
	approved := 0
	for _, r := range racers {
		sum := s.settle(r.sid, r.prompt)
		tr := sum.turn(t, r.prompt)
		require.NotNil(t, tr.end)
		assert.Empty(t, tr.resumes, "nothing of the turn came back after the restart:%s", describe(sum.log))
		assert.Equal(t, 1, terminals(sum.log, r.prompt), "the turn ended once")
		for _, e := range sum.log {
			assert.False(t, e.Seq > tr.end.Seq && e.P.PromptID == r.prompt, "nothing of the turn after its end: #%d %s:%s", e.Seq, e.Type, describe(sum.log))
		}
		ids, arrivals, _ := l.deliveries(r.entry)
		executing := sum.byType[typeToolExecuting]
		switch r.reply {
		case http.StatusConflict:
			requireLostToInterrupt(t, r.replyBody, r.interrupted)
			sum.requireEnd(t, r.prompt, typeInterrupted, "user")
			assert.Zero(t, sum.byType[typePermissionApproved])
			assert.Len(t, tr.starts, 1, "the turn never started again:%s", describe(sum.log))
			assert.Zero(t, executing, "the call never began:%s", describe(sum.log))
			assert.Zero(t, resolutions(sum.log), "nothing continued:%s", describe(sum.log))
			assert.Empty(t, ids, "no webhook delivery")
		case http.StatusOK:
			approved++
			assert.Equal(t, 1, sum.byType[typePermissionApproved])
			assert.LessOrEqual(t, resolutions(sum.log), 1, "at most one continuation:%s", describe(sum.log))
			if tr.end.Type == typeSucceeded {
				assert.False(t, r.interrupted, "an interrupt that answered true ended the turn:%s", describe(sum.log))
			} else {
				sum.requireEnd(t, r.prompt, typeInterrupted, "user")
			}
			assert.LessOrEqual(t, executing, 1)
			assert.LessOrEqual(t, arrivals, executing, "a delivery only for a call recorded executing:%s", describe(sum.log))
			assert.LessOrEqual(t, len(settlements(t, sum.log)), 1, "the call settled at most once:%s", describe(sum.log))
		default:
			t.Fatalf("the reply of %s: %d %s", r.sid, r.reply, r.replyBody)
		}
		assert.Empty(t, s.permissions(r.sid))
	}
	t.Logf("%d of %d approvals won the race", approved, n)
}

// TestWorkerdAlwaysAcrossKill: an "always" reply to a non-idempotent
// webhook's permission request, then a SIGKILL: after the restart, the
// next call of the same tool (the same resource) in that session is not
// asked again and is delivered once.
func TestWorkerdAlwaysAcrossKill(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w, l, _ := startLedgerWorkerd(t, "ask")
	s := w.as(t, "a-token")
	sid := s.create()
	a := s.prompt(sid, ledgerCall("always-first")+"\nafter the first")
	waitParked(s, sid)
	ps := s.permissions(sid)
	require.Len(t, ps, 1)
	s.do("POST", "/v1/sessions/"+sid+"/permissions/"+ps[0].ID, map[string]any{"reply": "always", "response_id": "always-1"}, http.StatusOK, nil)
	st := s.follow(sid, 0)
	st.until("the approved turn's end", endOf(a))
	st.close()

	w.restart(t)
	cursor := s.snapshot(sid).Cursor
	b := s.prompt(sid, ledgerCall("always-second")+"\nafter the second")
	st = s.follow(sid, cursor)
	first := st.until("the second call to park or its turn to end", func(e ev) bool { return e.Type == typeParked || endOf(b)(e) })
	st.close()
	require.NotEqual(t, typeParked, first.Type, "the second call asked again:%s", describe(st.log))
	sum := s.settle(sid, a, b)
	sum.requireEnd(t, a, typeSucceeded, "")
	sum.requireEnd(t, b, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typeParked], "only the first call asked:%s", describe(sum.log))
	assert.Equal(t, 1, sum.byType[typePermissionApproved], "one request, approved once")
	assert.Equal(t, 2, sum.byType[typeToolExecuting], "both calls began once:%s", describe(sum.log))
	assert.Empty(t, s.permissions(sid))
	for _, entry := range []string{"always-first", "always-second"} {
		ids, arrivals, recorded := l.deliveries(entry)
		assert.Len(t, ids, 1, "%s", entry)
		assert.Equal(t, 1, arrivals, "%s delivered once", entry)
		assert.Equal(t, 1, recorded, "%s", entry)
	}
	settled := settlements(t, sum.log)
	require.Len(t, settled, 2, "%s", describe(sum.log))
	for _, out := range settled {
		assert.Contains(t, out, `ok: {"recorded":`)
	}
}
