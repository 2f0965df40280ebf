package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdCreateKey: on Cloudflare, a create with an Idempotency-Key
// whose client went away once the object committed the tree (the test
// build's cut) is recorded with its key, and the retry with the key is
// answered that tree's id: one tree, not two. A retry with the same key
// and body is answered the first create's id, before and after a SIGKILL;
// another body is 409, another principal's key of the same name its own,
// a malformed key 400; a key whose tree was deleted stays spent (409, no
// new tree). An empty key reaches the Worker (workerd does not drop an
// empty header) and is 400, as on the local server. Every tree stored is
// listed.
func TestWorkerdCreateKey(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdTOML(t, "revenant_testroutes", selfService, "REVENANT_TOKENS:"+frontTokens)
	alice, bob := w.as(t, "a-token"), w.as(t, "b-token")

	cut := cutRequest(t, alice, "POST", "/v1/sessions", "create", "Idempotency-Key", "cut")
	assert.Equal(t, cut, alice.createKeyed("cut", "", http.StatusCreated), "the retry is answered the cut create's tree")

	code, header, body := frontAnswer(t, alice, http.MethodPost, "/v1/sessions", "Idempotency-Key", "same-answer")
	require.Equal(t, http.StatusCreated, code, body)
	code2, header2, body2 := frontAnswer(t, alice, http.MethodPost, "/v1/sessions", "Idempotency-Key", "same-answer")
	assert.Equal(t, code, code2)
	assert.Equal(t, body, body2, "the replay's body is the first answer's")
	header.Del("Date")
	header2.Del("Date")
	assert.Equal(t, header, header2, "the replay's header is the first answer's")

	first := alice.createKeyed("k", `{}`, http.StatusCreated)
	assert.Equal(t, first, alice.createKeyed("k", `{}`, http.StatusCreated))
	alice.createKeyed("k", `{"config":{"system_prompt":"x"}}`, http.StatusConflict)
	assert.NotEqual(t, first, bob.createKeyed("k", `{}`, http.StatusCreated), "a key is its principal's")
	alice.createKeyed(strings.Repeat("k", 201), `{}`, http.StatusBadRequest)
	sameAnswer := alice.createKeyed("same-answer", "", http.StatusCreated)
	alice.createKeyed("", `{}`, http.StatusBadRequest)
	assert.ElementsMatch(t, []string{cut, sameAnswer, first}, alice.listed())

	w.restart(t)
	assert.Equal(t, first, alice.createKeyed("k", `{}`, http.StatusCreated), "the key outlives a SIGKILL")
	require.Equal(t, http.StatusNoContent, frontStatus(t, alice, http.MethodDelete, "/v1/sessions/"+first))
	alice.createKeyed("k", `{}`, http.StatusConflict)
	assert.ElementsMatch(t, []string{cut, sameAnswer}, alice.listed(), "a spent key makes no tree")
	w.kill(t)
	assert.Equal(t, 3, w.treesStored(t), "the trees stored are alice's listed ones and bob's")
}

// TestWorkerdLostDirectoryAnswerKeepsTheKey: a keyed create whose
// directory row (and key) was committed with its answer lost (the test
// build's REVENANT_TEST_LOSE_PUT) succeeded: the front finds the row
// before it would undo anything, answers 201 and keeps the tree. A retry
// with the key, which the directory answers that tree's id, is answered a
// tree that exists (undone, it would have been a deleted tree's id).
func TestWorkerdLostDirectoryAnswerKeepsTheKey(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:on")
	s := w.client(t)
	id := s.createKeyed("k", `{}`, http.StatusCreated)
	w.waitLog(t, "revenant test: the directory's answer to a PUT lost", waitTimeout)
	assertTheKeysOneTree(t, w, s, `{}`, id, "the recorded one")
}

// TestWorkerdLostDirectoryAnswerLatePUT: a keyed create whose directory
// PUT the front took for failed while it was still on its way (the test
// build's REVENANT_TEST_LOSE_PUT=late answers it 500 and has it land just
// after the front's next directory request for the tree) is answered 503
// and undone, and the PUT that lands then records nothing: the front had
// the tree's id barred before it deleted the tree. Recorded, the list
// would show a session whose routes answer 404, and a retry with the key
// would be answered its id. The retry creates the session, once.
func TestWorkerdLostDirectoryAnswerLatePUT(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:late")
	s := w.client(t)
	s.createKeyed("k", `{}`, http.StatusServiceUnavailable)
	var landed string
	w.waitOutput(t, waitTimeout, func(out string) (bool, string) {
		_, after, found := strings.Cut(out, "revenant test: a late PUT lands: ")
		landed, _, found = strings.Cut(after, "\n")
		return found, "the late PUT's landing"
	})
	assert.True(t, strings.HasSuffix(landed, " 409"), "the late PUT is refused, not recorded: %s", landed)
	assert.Empty(t, s.listed(), "no session is listed")

	id := s.createKeyed("k", `{}`, http.StatusCreated)
	assertTheKeysOneTree(t, w, s, `{}`, id, "the retry's")
}

// TestWorkerdLostDirectoryAnswerUnbarred: a keyed create whose PUT the
// front took for failed (REVENANT_TEST_LOSE_PUT=late) and whose
// directory then failed every request to bar its id too
// (REVENANT_TEST_FAIL_ROW_DELETE=always: each of the front's tries) is
// answered 503 but not undone: the front cannot tell whether a row
// records the tree, and here the late PUT did record it. A retry with the
// key is answered that tree, which exists; deleted, it would answer 404.
func TestWorkerdLostDirectoryAnswerUnbarred(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:late", "REVENANT_TEST_FAIL_ROW_DELETE:always")
	s := w.client(t)
	s.createKeyed("k", `{}`, http.StatusServiceUnavailable)
	w.waitLog(t, "barring an unrecorded tree's id failed; it is left", waitTimeout)
	id := s.createKeyed("k", `{}`, http.StatusCreated)
	assertTheKeysOneTree(t, w, s, `{}`, id, "the first create's")
}

// TestWorkerdLostDirectoryAnswerBarredOnRetry: a keyed create whose PUT
// failed, nothing written (REVENANT_TEST_LOSE_PUT=fail), and whose first
// request to bar its id failed too (REVENANT_TEST_FAIL_ROW_DELETE) is
// undone all the same: the front asks again, the id is barred and the
// tree deleted, and the answer is 503. The retry with the key makes one
// new tree; the first one's storage is gone (given up after one try, it
// would be left, unlisted and reachable by no request).
func TestWorkerdLostDirectoryAnswerBarredOnRetry(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:fail", "REVENANT_TEST_FAIL_ROW_DELETE:on")
	s := w.client(t)
	s.createKeyed("k", `{}`, http.StatusServiceUnavailable)
	w.waitLog(t, "revenant test: the directory failed a request: DELETE ", waitTimeout)
	id := s.createKeyed("k", `{}`, http.StatusCreated)
	assertTheKeysOneTree(t, w, s, `{}`, id, "the retry's")
}

// TestWorkerdLostDirectoryAnswerFoundOnRetry: a keyed create whose PUT
// the front took for failed while it was still on its way
// (REVENANT_TEST_LOSE_PUT=late, landing just after the front's next
// request for the tree) and whose first request to bar its id failed
// (REVENANT_TEST_FAIL_ROW_DELETE) finds, asking again, the row the PUT
// committed meanwhile: the create succeeded, and is answered 201. A
// retry with the key is answered that tree, which exists.
func TestWorkerdLostDirectoryAnswerFoundOnRetry(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_LOSE_PUT:late", "REVENANT_TEST_FAIL_ROW_DELETE:on")
	s := w.client(t)
	id := s.createKeyed("k", `{}`, http.StatusCreated)
	w.waitLog(t, "revenant test: a late PUT lands: "+id+" 201", waitTimeout)
	assertTheKeysOneTree(t, w, s, `{}`, id, "the recorded one")
}

// TestWorkerdFailedKeyRead: a keyed create whose key the directory failed
// to read (the test build's REVENANT_TEST_FAIL_KEY_READ fails each key's
// first read, 500) is answered 503 naming the directory and creates
// nothing: the front cannot tell whether the key has a tree already. The
// retry is served, and one tree is stored.
func TestWorkerdFailedKeyRead(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_KEY_READ:on")
	s := w.client(t)
	code, body := frontRaw(t, s, http.MethodPost, "/v1/sessions", "Idempotency-Key", "k")
	assert.Equal(t, http.StatusServiceUnavailable, code, "the key read failed: %s", body)
	assert.Contains(t, body, "the session directory did not answer")
	w.waitLog(t, "revenant test: the directory failed a request: KEY k", waitTimeout)
	assert.Empty(t, s.listed(), "nothing is listed")
	id := s.createKeyed("k", "", http.StatusCreated)
	assertTheKeysOneTree(t, w, s, "", id, "the retry's")
}

// TestWorkerdCreateKeyTakenDiscards: a keyed create that found its key
// free but met it taken at its PUT (a same-key create recorded first; the
// test build's REVENANT_TEST_FAIL_KEY_READ=miss answers the first read
// that finds the key 404, as the race would) deletes the tree it just
// made and answers the key's: the first create's id. Kept, the tree
// would be stored, unlisted and reachable by no request.
func TestWorkerdCreateKeyTakenDiscards(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TEST_FAIL_KEY_READ:miss")
	s := w.client(t)
	first := s.createKeyed("k", `{}`, http.StatusCreated)
	assert.Equal(t, first, s.createKeyed("k", `{}`, http.StatusCreated), "the key's tree is the answer")
	w.waitLog(t, "revenant test: the directory failed a request: KEY k", waitTimeout)
	assertTheKeysOneTree(t, w, s, `{}`, first, "the key's")
}

// assertTheKeysOneTree asserts what every lost-answer case ends with: key
// "k" (with body) is answered id, a tree that exists and is the caller's
// one listed session; then, workerd stopped, that one tree is all that is
// stored (why names it).
func assertTheKeysOneTree(t *testing.T, w *workerd, s *server, body, id, why string) {
	t.Helper()
	assert.Equal(t, id, s.createKeyed("k", body, http.StatusCreated), "the key is answered its tree")
	assert.Equal(t, http.StatusOK, frontStatus(t, s, http.MethodGet, "/v1/sessions/"+id), "which exists")
	assert.Equal(t, []string{id}, s.listed(), "and is the one listed")
	w.kill(t)
	assert.Equal(t, 1, w.treesStored(t), "one tree is stored: "+why)
}
