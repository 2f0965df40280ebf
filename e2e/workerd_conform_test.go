package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conformTest is one test case of the storage suite as the object's test
// route reports it (durableobject.ConformTest).
type conformTest struct {
	Name    string   `json:"name"`
	Failed  bool     `json:"failed"`
	Skipped bool     `json:"skipped"`
	Logs    []string `json:"logs"`
}

// runConform runs the storage conformance suite inside the tree's object
// on local workerd (the object's own DB: transactionSync and sql.exec),
// through the front, and returns what each test did.
func runConform(t *testing.T, s *server, sid, query string) []conformTest {
	t.Helper()
	code, body := frontRaw(t, s, http.MethodPost, "/v1/sessions/"+sid+"/test/conform"+query)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var res struct {
		Tests []conformTest `json:"tests"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &res), "%s", body)
	return res.Tests
}

// TestWorkerdConform: core/storage/storagetest against durableobject.DB
// inside workerd. The suite runs in a tree created for it (its tables, v,
// p and s, are none of revenant's; the object drops them around each
// test), reached through the front like any tree route. Every test passes
// or is skipped for a capability this host has not (a rival connection, a
// COMMIT fault, Close) or a departure the object names with its reason;
// a DB that commits a failed transaction is caught.
func TestWorkerdConform(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes")
	s := w.client(t)
	sid := s.create()

	tests := runConform(t, s, sid, "")
	require.NotEmpty(t, tests)
	passed := 0
	for _, tc := range tests {
		switch {
		case tc.Failed:
			t.Errorf("%s failed in workerd: %q", tc.Name, tc.Logs)
		case tc.Skipped:
			t.Logf("skipped %s: %q", tc.Name, tc.Logs)
		default:
			passed++
		}
	}
	t.Logf("storage suite in workerd: %d tests, %d passed", len(tests), passed)
	assert.Greater(t, passed, len(tests)/2, "most of the suite runs here")

	// The tree is untouched: its own tables were never the suite's.
	sn := s.snapshot(sid)
	assert.Equal(t, sid, sn.ID)
	a := s.prompt(sid, "after the suite")
	s.settle(sid, a).requireEnd(t, a, typeSucceeded, "")

	t.Run("a DB that does not roll back fails the suite", func(t *testing.T) {
		failed := map[string]bool{}
		for _, tc := range runConform(t, s, sid, "?broken=no-rollback") {
			failed[tc.Name] = tc.Failed
		}
		assert.True(t, failed["storage/tx/rolls back when fn returns an error"], "%v", failed)
	})
}
