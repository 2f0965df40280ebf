package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdSlowBootAndDeleteUnderAlarm pins two rules of the Durable
// Object host in one restart of wrangler dev, on two trees whose turns
// were running at a SIGKILL:
//
//   - The boot runs inside blockConcurrencyWhile (durableobject/shim.js):
//     with the boot made slow (REVENANT_TEST_BOOT_DELAY, a test build's),
//     requests sent at once after the restart meet the objects while they
//     boot, and each is served after its boot, 200 with the tree, never
//     404; the quick tree's turn then ends, resumed once.
//   - A tree deleted while its alarm handler holds for the turn it resumed
//     gets no alarm back: the handler neither sweeps the deleted storage
//     nor re-arms (no "sweep failed" line for it), and the object's
//     database keeps none of revenant's tables, nor an alarm.
func TestWorkerdSlowBootAndDeleteUnderAlarm(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TOKENS:"+frontTokens, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.as(t, "a-token")
	held, quick := s.create(), s.create()
	heldA := s.prompt(held, "/sleep 40s\nlate")
	quickA := s.prompt(quick, "/sleep 2s\nafter the slow boot")
	for sid, a := range map[string]string{held: heldA, quick: quickA} {
		st := s.follow(sid, 0)
		st.until("the sleeping step", forPrompt(typeStepStarted, a))
		st.close()
	}

	w.vars = append(w.vars, "REVENANT_TEST_BOOT_DELAY:2s")
	w.restart(t)
	for _, sid := range []string{quick, held} {
		code, body := frontRaw(t, s, "GET", "/v1/sessions/"+sid+"?limit=1")
		require.Equal(t, http.StatusOK, code, "GET %s at once after the restart: served after the boot; %s", sid, body)
		var sn snap
		require.NoError(t, json.Unmarshal([]byte(body), &sn))
		assert.Equal(t, sid, sn.ID)
	}
	assert.Equal(t, "busy", s.snapshot(held).Status, "the held turn was resumed")

	// The held tree's alarm resumed nothing new (its boot did) and holds
	// while the 40 s step sleeps: delete the tree now.
	w.waitLog(t, `msg="alarm swept" tree=`+held+` running=true`, waitTimeout)
	s.do("DELETE", "/v1/sessions/"+held, nil, http.StatusNoContent, nil)
	w.waitLog(t, `msg="alarm handled" tree=`+held, waitTimeout)
	for _, line := range strings.Split(w.logs.String(), "\n") {
		if strings.Contains(line, "tree="+held) {
			assert.NotContains(t, line, "sweep failed", "the deleted tree's alarm swept nothing, armed no retry")
		}
	}

	sum := s.settle(quick, quickA)
	ta := sum.requireEnd(t, quickA, typeSucceeded, "")
	assert.Len(t, ta.resumes, 1, "resumed once:%s", describe(sum.log))

	// Stopped, the state on disk: the quick tree's database holds
	// revenant's tables, the deleted one's only local dev's own (see
	// TestWorkerdStaleOwnerCache); an alarm set on it would be a table
	// of workerd's there.
	w.kill(t)
	var clean, full int
	for path := range w.treeState(t) {
		if !strings.HasSuffix(path, ".sqlite") || filepath.Base(path) == "metadata.sqlite" {
			continue
		}
		tables := tablesOf(t, path)
		t.Logf("%s: %v", filepath.Base(path), tables)
		if len(tables) == 0 || (len(tables) == 1 && tables[0] == "__miniflare_do_name") {
			clean++
		} else {
			full++
		}
	}
	assert.Equal(t, 1, clean, "the deleted tree's database is empty")
	assert.Equal(t, 1, full, "the quick tree's database")
}
