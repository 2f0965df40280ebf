package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// offlineRunner is the real turn runner with the offline model and the
// default tools, the question tool among them.
func offlineRunner(t *testing.T) core.Driver {
	reg, err := tool.NewRegistry(tool.Defaults()...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(nil, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	return r
}

type questionBody struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	SessionID  string `json:"session_id"`
	CallID     string `json:"call_id"`
	CreatedSeq int64  `json:"created_seq"`
	Request    struct {
		Questions []struct {
			Question string   `json:"question"`
			Choices  []string `json:"choices"`
		} `json:"questions"`
	} `json:"request"`
}

type resolutionBody struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ResponseID string `json:"response_id"`
	Duplicate  bool   `json:"duplicate"`
	Reply      struct {
		Answers [][]string `json:"answers"`
		Message string     `json:"message"`
	} `json:"reply"`
}

// listQuestions is GET …/questions.
func (c *client) listQuestions(id string) []questionBody {
	c.t.Helper()
	var out struct{ Questions []questionBody }
	require.Equal(c.t, http.StatusOK, c.do("GET", "/v1/sessions/"+id+"/questions", "", &out))
	return out.Questions
}

// cursor is the session's snapshot cursor: it moves with every event.
func (c *client) cursor(id string) int64 {
	c.t.Helper()
	var snap struct{ Cursor int64 }
	require.Equal(c.t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	return snap.Cursor
}

const choicePrompt = `/tool question {"questions":[{"question":"Which colour?","choices":["red","green"]}]}`

// The question lifecycle over HTTP: listed in the snapshot and the list,
// every bad reply a typed 4xx that writes nothing, then first response
// wins (200, the same 200 again, 409 with the winner) and the turn ends.
func TestQuestionOverHTTP(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	f := newFixture(t, offlineRunner(t), tokens)
	alice, bob := f.client(t, "secret-a"), f.client(t, "secret-b")
	id, other := alice.create(), alice.create()
	require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":`+jsonString(choicePrompt)+`}`, nil))
	f.trees.tree(id).node.Idle()

	var snap struct {
		Status   string
		Blockers []questionBody
	}
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id, "", &snap))
	assert.Equal(t, "waiting", snap.Status)
	require.Len(t, snap.Blockers, 1)
	listed := alice.listQuestions(id)
	require.Len(t, listed, 1)
	q := listed[0]
	assert.Equal(t, snap.Blockers[0].ID, q.ID)
	assert.Equal(t, "question", q.Kind)
	assert.Equal(t, []string{"red", "green"}, q.Request.Questions[0].Choices)

	// The stream carries the same blocker in its parked event.
	parked := treetest.OfType(f.trees.tree(id).tree.Events(id), event.StepParked)
	require.Len(t, parked, 1)
	var p event.Parked
	require.NoError(t, parked[0].Decode(&p))
	require.Len(t, p.Blockers, 1)
	assert.Equal(t, q.ID, p.Blockers[0].ID)
	assert.Equal(t, parked[0].Seq, q.CreatedSeq, "created_seq is the parked event's seq")

	path := "/v1/sessions/" + id + "/questions/" + q.ID
	before := alice.cursor(id)
	bad := []badReply{
		{"unknown question id", alice, "/v1/sessions/" + id + "/questions/q-nope-0", `{"answers":[["red"]],"response_id":"r"}`, 404, api.ErrNotFound},
		{"a question of another tree", alice, "/v1/sessions/" + other + "/questions/" + q.ID, `{"answers":[["red"]],"response_id":"r"}`, 404, api.ErrNotFound},
		{"another principal", bob, path, `{"answers":[["red"]],"response_id":"r"}`, 404, api.ErrNotFound},
		{"wrong count", alice, path, `{"answers":[["red"],["green"]],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"no answers", alice, path, `{"answers":[],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"a choice not offered", alice, path, `{"answers":[["blue"]],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"two choices for one", alice, path, `{"answers":[["red","green"]],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"an answer not a string", alice, path, `{"answers":[[1]],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"missing response_id", alice, path, `{"answers":[["red"]]}`, 400, api.ErrInvalidRequest},
		{"blank response_id", alice, path, `{"answers":[["red"]],"response_id":" "}`, 400, api.ErrInvalidRequest},
		{"answers and cancel", alice, path, `{"answers":[["red"]],"cancel":true,"response_id":"r"}`, 400, api.ErrInvalidRequest},
	}
	assertRefused(t, bad)
	assert.Equal(t, before, alice.cursor(id), "nothing written for a bad reply")
	assert.Len(t, alice.listQuestions(id), 1, "still pending")

	var won resolutionBody
	require.Equal(t, http.StatusOK, alice.do("POST", path, `{"answers":["green"],"message":"brighter","response_id":"r1"}`, &won))
	assert.Equal(t, "answered", won.State)
	assert.Equal(t, [][]string{{"green"}}, won.Reply.Answers, "a string is an answer of one")
	assert.Equal(t, "brighter", won.Reply.Message)
	assert.False(t, won.Duplicate)
	var again resolutionBody
	require.Equal(t, http.StatusOK, alice.do("POST", path, `{"answers":["green"],"message":"brighter","response_id":"r1"}`, &again))
	assert.True(t, again.Duplicate, "the same response_id again is the original outcome")
	var conflict struct {
		Error  struct{ Type api.ErrorType }
		Winner resolutionBody
	}
	require.Equal(t, http.StatusConflict, alice.do("POST", path, `{"answers":["red"],"response_id":"r2"}`, &conflict))
	assert.Equal(t, api.ErrConflict, conflict.Error.Type)
	assert.Equal(t, "r1", conflict.Winner.ResponseID, "the 409 carries the winner")
	assert.Equal(t, [][]string{{"green"}}, conflict.Winner.Reply.Answers)

	f.trees.tree(id).node.Idle()
	var done struct {
		Status   string
		Turns    int
		Messages []struct{ Role, Text string }
	}
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id, "", &done))
	assert.Equal(t, "idle", done.Status)
	assert.Equal(t, 1, done.Turns)
	last := done.Messages[len(done.Messages)-1]
	assert.Contains(t, last.Text, `"Which colour?" → "green"`, "the model saw the answer")
}

// A child's question is listed on its root's path as well as its own, not
// in the root's snapshot, and answered on the root's path.
func TestChildQuestionAnsweredOnRootPath(t *testing.T) {
	f := newFixture(t, offlineRunner(t), nil)
	c := f.client(t, "")
	id := c.create()
	child := id + ".1"
	_, err := f.trees.tree(id).node.Inst.CreateSession(context.Background(), core.NewSession{ID: child, ParentID: id})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+child+"/prompt", `{"text":"/ask are you sure?"}`, nil))
	f.trees.tree(id).node.Idle()

	onRoot, onChild := c.listQuestions(id), c.listQuestions(child)
	require.Len(t, onRoot, 1, "tree-wide on the root")
	require.Len(t, onChild, 1)
	assert.Equal(t, onChild[0].ID, onRoot[0].ID)
	assert.Equal(t, child, onRoot[0].SessionID)
	var rootSnap struct{ Blockers []questionBody }
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &rootSnap))
	assert.Empty(t, rootSnap.Blockers, "a snapshot lists the session's own blockers")

	// A sibling's path does not reach it: only the asking session's and the root's do.
	sibling := id + ".2"
	_, err = f.trees.tree(id).node.Inst.CreateSession(context.Background(), core.NewSession{ID: sibling, ParentID: id})
	require.NoError(t, err)
	assertRefused(t, []badReply{{name: "on a sibling's path", c: c, path: "/v1/sessions/" + sibling + "/questions/" + onRoot[0].ID,
		body: `{"answers":[["yes"]],"response_id":"r0"}`, status: http.StatusNotFound, typ: api.ErrNotFound}})

	var won resolutionBody
	require.Equal(t, http.StatusOK, c.do("POST", "/v1/sessions/"+id+"/questions/"+onRoot[0].ID, `{"answers":[["yes"]],"response_id":"r1"}`, &won))
	f.trees.tree(id).node.Idle()
	var snap struct {
		Status string
		Turns  int
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+child, "", &snap))
	assert.Equal(t, "idle", snap.Status)
	assert.Equal(t, 1, snap.Turns)
}

// A root lists its tree's questions oldest first across its sessions: by
// when each was asked, not by the asking session's own event count.
func TestTreeQuestionsAreListedOldestFirst(t *testing.T) {
	f := newFixture(t, offlineRunner(t), nil)
	c := f.client(t, "")
	id := c.create()
	node := f.trees.tree(id).node
	busy, quiet := id+".1", id+".2"
	for _, child := range []string{busy, quiet} {
		_, err := node.Inst.CreateSession(context.Background(), core.NewSession{ID: child, ParentID: id})
		require.NoError(t, err)
	}
	// The busy child's log grows first, then it asks; the quiet one asks
	// after it, at a lower seq of its own.
	for _, p := range []struct{ session, text string }{{busy, "hello"}, {busy, "hello again"}, {busy, "/ask first?"}, {quiet, "/ask second?"}} {
		require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+p.session+"/prompt", `{"text":`+jsonString(p.text)+`}`, nil))
		node.Idle()
	}
	require.Greater(t, c.cursor(busy), c.cursor(quiet), "the first question was asked at the higher seq")

	listed := c.listQuestions(id)
	require.Len(t, listed, 2)
	assert.Equal(t, []string{busy, quiet}, []string{listed[0].SessionID, listed[1].SessionID}, "the first asked is listed first")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// badReply is a reply that must be refused with status and an error of typ.
type badReply struct {
	name   string
	c      *client
	path   string
	body   string
	status int
	typ    api.ErrorType
}

// assertRefused posts each bad reply and checks how it is refused.
func assertRefused(t *testing.T, bad []badReply) {
	t.Helper()
	for _, b := range bad {
		status, typ := b.c.errorType("POST", b.path, b.body)
		assert.Equal(t, b.status, status, b.name)
		assert.Equal(t, b.typ, typ, b.name)
	}
}

// A reply (an answer, a permission) commits even if the client
// disconnects while it waits: the request's context is cancelled while the
// reply's write, which met a full disk, waits to retry, and the reply still
// lands once storage recovers, and the turn goes on with it.
func TestReplyCommitsAfterClientDisconnects(t *testing.T) {
	for _, tc := range []struct {
		name, config, prompt, kind, reply string
		resolved                          event.Type
	}{
		{"answer", `{}`, choicePrompt, "questions", `{"answers":[["green"]],"response_id":"r1"}`, event.QuestionAnswered},
		{"permission", `{"config":{"permissions":[{"action":"kv_put","resource":"kv:*","decision":"ask"}]}}`,
			`/tool kv_put {"key":"k","value":"42"}`, "permissions", `{"reply":"once","response_id":"r1"}`, event.PermissionApproved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, offlineRunner(t), nil)
			var fault *faultvfs.Fault
			f.trees.prepare = func(tr *treetest.Tree) { fault = tr.Faults() }
			c := f.client(t, "")
			var created struct{ ID string }
			require.Equal(t, http.StatusCreated, c.do("POST", "/v1/sessions", tc.config, &created))
			id := created.ID
			require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":`+jsonString(tc.prompt)+`}`, nil))
			tree := f.trees.tree(id)
			tree.node.Idle()
			pending := c.listBlockers(id, tc.kind)
			require.Len(t, pending, 1)

			fault.FailNext(1, faultvfs.Full)
			client, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			req := httptest.NewRequest("POST", "/v1/sessions/"+id+"/"+tc.kind+"/"+pending[0],
				strings.NewReader(tc.reply)).WithContext(client)
			rec := httptest.NewRecorder()
			waits := tree.tree.DriveEach(func() { nethttp.Handler(f.h).ServeHTTP(rec, req) }, func(retry.Wait) { hangUp() })
			require.NotEmpty(t, waits, "the reply's write waited for storage")

			tree.node.Idle()
			assert.Empty(t, c.listBlockers(id, tc.kind), "resolved: %s", rec.Body)
			assert.Len(t, treetest.OfType(tree.tree.Events(id), tc.resolved), 1)
			var done struct {
				Status string
				Turns  int
			}
			require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &done))
			assert.Equal(t, "idle", done.Status)
			assert.Equal(t, 1, done.Turns, "the turn went on with the reply and ended")
		})
	}
}

// listBlockers is the ids GET …/questions or …/permissions (kind) lists.
func (c *client) listBlockers(id, kind string) []string {
	c.t.Helper()
	var out map[string][]struct{ ID string }
	require.Equal(c.t, http.StatusOK, c.do("GET", "/v1/sessions/"+id+"/"+kind, "", &out))
	var ids []string
	for _, b := range out[kind] {
		ids = append(ids, b.ID)
	}
	return ids
}
