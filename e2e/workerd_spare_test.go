package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdSpare runs objects with REVENANT_SPARE=on, the one path no
// other test takes (the benchmark measures it): each new object takes the
// spare Go program started after the previous one, and must take it for
// itself. Four trees created one after another each answer their own
// turn, and each log holds only its own prompt; a spare handed to two
// objects would refuse the second's boot (503) or mix their storage.
func TestWorkerdSpare(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", "REVENANT_SPARE:on", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	for i := range 4 {
		sid := s.create()
		text := fmt.Sprintf("tree number %d", i)
		a := s.prompt(sid, text)
		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		require.NotEmpty(t, ta.done)
		assert.Equal(t, "You said: "+text, ta.done[len(ta.done)-1].P.Text, "tree %d answers its own prompt", i)
		assert.Len(t, sum.order, 2, "tree %d holds its prompt and the probe only", i)
	}
}

// TestWorkerdSpareOfAGoneObject: a spare Go program is started from a
// timer of the object that booted before it, and may be taken after that
// object is gone (evicted, here aborted). The object that took it must
// still see its program end: here the program ends while the alarm
// handler holds for a running turn (as in TestWorkerdExitDuringAlarm),
// and the handler must answer from the program's end and give the object
// up, so the retried alarm resumes the turn on a fresh object. Watching
// the end through a Promise of the starter's made the watch the
// starter's: workerd cancels such a Promise's continuations once its
// object is gone, and the handler waited for ever.
func TestWorkerdSpareOfAGoneObject(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_SPARE:on", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	starter := s.create()
	w.waitLog(t, "revenant test: a spare Go program is ready", waitTimeout)
	code, body := s.raw(http.MethodPost, "/v1/sessions/"+starter+"/test/abort")
	require.GreaterOrEqual(t, code, 500, "the aborted request fails: %s", body)
	sid := s.create()
	w.waitLog(t, "revenant test: the object took a spare Go program", waitTimeout)

	a := s.prompt(sid, "/sleep 120s\nlate")
	st := s.follow(sid, 0)
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()
	w.waitLog(t, `msg="alarm swept" tree=`+sid+` running=true`, waitTimeout)
	boots := strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid)
	code, body = s.raw(http.MethodPost, "/v1/sessions/"+sid+"/test/exit")
	require.Equal(t, http.StatusNoContent, code, "%s", body)
	w.waitLog(t, "panic: revenant test route: exit", waitTimeout)
	w.waitLog(t, `msg="tree booted" tree=`+sid+` resumed=1`, waitTimeout)
	assert.Greater(t, strings.Count(w.logs.String(), `msg="tree booted" tree=`+sid), boots, "a fresh object booted the tree")
	assert.True(t, s.interrupt(sid), "the resumed turn runs")
}
