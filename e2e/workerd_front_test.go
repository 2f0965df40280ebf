package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The front Worker (worker/) on local workerd, through its public API:
// tokens, the per-principal directory, id checks before any object, the
// principal the front sets, ?access_token= on the event stream only, and
// the README walk-through end to end. One wrangler for the whole test,
// its subtests one after another.

// frontTokens is REVENANT_TOKENS for the test: wrangler's --var splits
// NAME:value at the first ':', so the value keeps its own colons and commas.
// zoë's name is not ASCII: the front percent-encodes a principal for the
// tree's object, which must read it back as the same owner. Alice is not
// alice: principals are compared as written, as the local server does.
const frontTokens = "alice:a-token,bob:b-token,zoë:z-token,Alice:cap-a-token"

// bearer adds a token to every request of a client.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// as is a client of w sending token ("" for none).
func (w *workerd) as(t *testing.T, token string) *server {
	s := w.client(t)
	if token != "" {
		s.client = &http.Client{Transport: w.transport(bearer(token))}
	}
	return s
}

// treeFiles counts the SQLite files of Tree objects under the state
// directory: one per object that ever stored something.
func (w *workerd) treeFiles(t *testing.T) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(w.state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".sqlite") && strings.Contains(filepath.Dir(path), "Tree") {
			n++
		}
		return nil
	})
	require.NoError(t, err)
	return n
}

// frontRaw sends a request with no body and the given headers (NAME,
// value pairs) and returns the status and body.
func frontRaw(t *testing.T, s *server, method, path string, header ...string) (int, string) {
	t.Helper()
	code, _, body := frontAnswer(t, s, method, path, header...)
	return code, body
}

// frontAnswer is frontRaw with the answer's header.
func frontAnswer(t *testing.T, s *server, method, path string, header ...string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// frontStatus is frontRaw's status, for a request a test expects refused;
// an event stream that was not refused is not read.
func frontStatus(t *testing.T, s *server, method, path string, header ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(`{"text":"not yours"}`))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

// foreignRefused is how many requests the object of tree sid refused for
// naming another principal (test route foreign), asked as its owner.
func foreignRefused(t *testing.T, owner *server, sid string) int {
	t.Helper()
	code, body := frontRaw(t, owner, "POST", "/v1/sessions/"+sid+"/test/foreign")
	require.Equal(t, http.StatusOK, code, "%s", body)
	var out struct{ Refused int }
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	return out.Refused
}

func TestWorkerdFront(t *testing.T) {
	t.Parallel() // see workerd_test.go
	// The settings as a TOML table (an object in env, not a string): the
	// front and the objects both read max_body from it (the body limits).
	w := startWorkerdTOML(t, "revenant_testroutes", fmt.Sprintf("REVENANT_SETTINGS = { max_body = %d }", maxBody),
		"REVENANT_TOKENS:"+frontTokens, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay, "REVENANT_ALLOWED_ORIGINS:"+frontOrigin)
	alice, bob, nobody := w.as(t, "a-token"), w.as(t, "b-token"), w.as(t, "")

	// A principal whose name is not ASCII owns its trees like any other:
	// the object reads back the name the front encoded for it.
	t.Run("a non-ASCII principal", func(t *testing.T) {
		zoe := w.as(t, "z-token")
		sid := zoe.create()
		assert.Equal(t, http.StatusOK, frontStatus(t, zoe, "GET", "/v1/sessions/"+sid))
		assert.Equal(t, http.StatusNotFound, frontStatus(t, alice, "GET", "/v1/sessions/"+sid))
		assert.Zero(t, foreignRefused(t, zoe, sid), "the object took zoë for its owner")
		// Sent raw, workerd passes the header by a quirk it warns about
		// on every request.
		assert.NotContains(t, w.logs.String(), "non-ASCII", "the principal header is encoded")
	})

	// The bearer tokens are the front's alone: a tree's Go program, which
	// trusts the principal the front sets, never has them (the shim keeps
	// them out of its environment), while it has the vars it reads.
	t.Run("a tree never sees the tokens", func(t *testing.T) {
		sid := alice.create()
		for name, want := range map[string]bool{"REVENANT_TOKENS": false, "REVENANT_OFFLINE_WORD_DELAY": true} {
			code, body := frontRaw(t, alice, "POST", "/v1/sessions/"+sid+"/test/env?name="+name)
			require.Equal(t, http.StatusOK, code, "%s", body)
			assert.JSONEq(t, fmt.Sprintf(`{"set":%t}`, want), body, name)
		}
	})

	t.Run("no token is 401", func(t *testing.T) {
		sid := alice.create()
		for _, rq := range []struct{ method, path string }{
			{"GET", "/v1/sessions"},
			{"POST", "/v1/sessions"},
			{"GET", "/v1/sessions/" + sid},
			{"POST", "/v1/sessions/" + sid + "/prompt"},
			{"GET", "/v1/sessions/" + sid + "/events"},
			{"DELETE", "/v1/sessions/" + sid},
		} {
			assert.Equal(t, http.StatusUnauthorized, frontStatus(t, nobody, rq.method, rq.path), "%s %s", rq.method, rq.path)
		}
		assert.Equal(t, http.StatusUnauthorized, frontStatus(t, w.as(t, "wrong-token"), "GET", "/v1/sessions/"+sid))
		code, _ := frontRaw(t, nobody, "GET", "/healthz")
		assert.Equal(t, http.StatusOK, code, "/healthz needs no token")
	})

	t.Run("malformed or unknown ids touch no object", func(t *testing.T) {
		// The count sees objects: a create adds one file.
		before := w.treeFiles(t)
		alice.create()
		require.Equal(t, before+1, w.treeFiles(t), "the Tree namespace's SQLite files are where the test looks")
		before++
		ids := []string{"bad..id", "%00", strings.Repeat("a", 65), "x%2Fy", "a.", ".a", "a%20b", "nosuchtree", "nosuch.child"}
		for _, id := range ids {
			for _, rq := range []struct{ method, path string }{
				{"GET", "/v1/sessions/" + id},
				{"POST", "/v1/sessions/" + id + "/prompt"},
				{"GET", "/v1/sessions/" + id + "/events"},
				{"POST", "/v1/sessions/" + id + "/interrupt"},
				{"DELETE", "/v1/sessions/" + id},
			} {
				// A child's id of a tree alice does not own is 404 as any
				// other, as on the local server: not 400 before the owner
				// check.
				assert.Equal(t, http.StatusNotFound, frontStatus(t, alice, rq.method, rq.path), "%s %s", rq.method, rq.path)
			}
		}
		assert.Equal(t, before, w.treeFiles(t), "no Tree object was created")
	})

	// Only a root can be deleted: a child's id of the caller's own tree is
	// 400 (whether or not the child exists), of another's tree 404, as on
	// the local server; nothing is deleted.
	t.Run("a child's delete is refused after the owner check", func(t *testing.T) {
		sid := alice.create()
		for _, id := range []string{sid + ".1", sid + ".", sid + ".x.y"} {
			assert.Equal(t, http.StatusBadRequest, frontStatus(t, alice, "DELETE", "/v1/sessions/"+id), id)
			assert.Equal(t, http.StatusNotFound, frontStatus(t, bob, "DELETE", "/v1/sessions/"+id), id)
		}
		assert.Equal(t, http.StatusOK, frontStatus(t, alice, "GET", "/v1/sessions/"+sid), "the tree is intact")
		assert.Contains(t, alice.listed(), sid)
	})

	t.Run("another principal's session is 404", func(t *testing.T) {
		sid := alice.create()
		// Alice's own read puts her pair in the owner cache by way of the
		// owner check (her create put it there by its own way): it must
		// answer for alice alone.
		alice.snapshot(sid)
		forged := []string{"X-Revenant-Principal", "alice", "X-Revenant-Tree", sid}
		for _, hs := range [][]string{nil, forged} {
			for _, rq := range []struct{ method, path string }{
				{"GET", "/v1/sessions/" + sid},
				{"POST", "/v1/sessions/" + sid + "/prompt"},
				{"GET", "/v1/sessions/" + sid + "/events"},
				{"POST", "/v1/sessions/" + sid + "/interrupt"},
				{"GET", "/v1/sessions/" + sid + "/permissions"},
				{"DELETE", "/v1/sessions/" + sid},
			} {
				assert.Equal(t, http.StatusNotFound, frontStatus(t, bob, rq.method, rq.path, hs...), "bob %s %s %v", rq.method, rq.path, hs)
			}
		}
		// The front's own answer is the API's error body, as every host
		// writes it (a newline after the JSON).
		code, header, body := frontAnswer(t, bob, "GET", "/v1/sessions/"+sid)
		assert.Equal(t, http.StatusNotFound, code)
		assert.Equal(t, `{"error":{"type":"not_found","message":"no such session"}}`+"\n", body)
		assert.Equal(t, "application/json", header.Get("Content-Type"))
		assert.Equal(t, "nosniff", header.Get("X-Content-Type-Options"))
		sn := alice.snapshot(sid)
		assert.Equal(t, sid, sn.ID, "alice's session is intact")
		assert.Empty(t, sn.Prompts, "bob's prompts were never admitted")
		assert.Contains(t, alice.listed(), sid, "bob's delete removed nothing")
		// The front refused bob itself, its owner cache (which holds
		// alice's pair since her create) included: none of bob's requests
		// reached the object, whose own check would have counted it.
		assert.Zero(t, foreignRefused(t, alice, sid), "bob's requests never reached alice's object")
	})

	// The front sets the principal header itself, over any the client
	// sent: bob on his own tree, naming alice (raw, or percent-encoded as
	// the front encodes it), is served as bob. A front that kept the
	// client's header would pass alice to bob's object, which refuses
	// (and counts) a request for another principal's tree.
	t.Run("a client's principal header is replaced", func(t *testing.T) {
		sid := bob.create()
		for _, forged := range []string{"alice", "zo%C3%AB"} {
			code, body := frontRaw(t, bob, "GET", "/v1/sessions/"+sid, "X-Revenant-Principal", forged)
			require.Equal(t, http.StatusOK, code, "bob with principal header %q: %s", forged, body)
			var sn struct{ ID string }
			require.NoError(t, json.Unmarshal([]byte(body), &sn))
			assert.Equal(t, sid, sn.ID, "bob's own session")
		}
		assert.Zero(t, foreignRefused(t, bob, sid), "the object saw bob, not the principal the client named")
	})

	t.Run("the object refuses another principal by itself", func(t *testing.T) {
		// As a front that let a request through would send it: every
		// tree route, with the principal header bob's (test route as).
		sid := alice.create()
		statuses := func(principal string) map[string]int {
			code, body := frontRaw(t, alice, "POST", "/v1/sessions/"+sid+"/test/as?principal="+principal)
			require.Equal(t, http.StatusOK, code, "%s", body)
			var out map[string]int
			require.NoError(t, json.Unmarshal([]byte(body), &out))
			require.Len(t, out, 8, "every tree route: %s", body)
			return out
		}
		for route, code := range statuses("bob") {
			assert.Equal(t, http.StatusNotFound, code, "bob: %s", route)
		}
		assert.Equal(t, 8, foreignRefused(t, alice, sid), "the object's own check refused each")
		for route, code := range statuses("alice") {
			if strings.HasPrefix(route, "GET ") {
				assert.Equal(t, http.StatusOK, code, "alice: %s", route)
			}
		}
	})

	t.Run("list shows only the caller's trees", func(t *testing.T) {
		a1, a2, b1 := alice.create(), alice.create(), bob.create()
		al, bl := alice.listed(), bob.listed()
		assert.Subset(t, al, []string{a1, a2})
		assert.NotContains(t, al, b1)
		assert.Contains(t, bl, b1)
		assert.NotContains(t, bl, a1)
		assert.NotContains(t, bl, a2)
		var page struct {
			Sessions   []struct{ ID string } `json:"sessions"`
			NextCursor string                `json:"next_cursor"`
		}
		alice.do("GET", "/v1/sessions?limit=1", nil, http.StatusOK, &page)
		assert.Len(t, page.Sessions, 1)
		assert.NotEmpty(t, page.NextCursor, "alice has more than one tree: a next page")
		var next struct {
			Sessions []struct{ ID string } `json:"sessions"`
		}
		alice.do("GET", "/v1/sessions?limit=1&cursor="+page.NextCursor, nil, http.StatusOK, &next)
		require.Len(t, next.Sessions, 1)
		assert.NotEqual(t, page.Sessions[0].ID, next.Sessions[0].ID, "the cursor moves on")
		for _, q := range []string{"limit=0", "cursor=nope"} {
			code, body := frontRaw(t, alice, "GET", "/v1/sessions?"+q)
			assert.Equal(t, http.StatusBadRequest, code, q)
			assert.Contains(t, body, `"type":"invalid_request"`, q)
		}
	})

	t.Run("access_token works only on events", func(t *testing.T) {
		sid := alice.create()
		q := "?access_token=a-token"
		st := nobody.open(sid, 0, q, "")
		st.until("the session's creation", isType(typeCreated))
		st.close()
		for _, rq := range []struct{ method, path string }{
			{"GET", "/v1/sessions" + q},
			{"POST", "/v1/sessions" + q},
			{"GET", "/v1/sessions/" + sid + q},
			{"POST", "/v1/sessions/" + sid + "/prompt" + q},
			{"POST", "/v1/sessions/" + sid + "/interrupt" + q},
			{"DELETE", "/v1/sessions/" + sid + q},
		} {
			assert.Equal(t, http.StatusUnauthorized, frontStatus(t, nobody, rq.method, rq.path), "%s %s", rq.method, rq.path)
		}
		assert.Equal(t, http.StatusNotFound, frontStatus(t, nobody, "GET", "/v1/sessions/"+sid+"/events?access_token=b-token&after=0"),
			"bob's token on the stream of alice's session")
		// The scheme's name is case-insensitive (RFC 9110 §11.1).
		assert.Equal(t, http.StatusOK, frontStatus(t, nobody, "GET", "/v1/sessions/"+sid, "Authorization", "bearer a-token"))
		assert.Contains(t, alice.listed(), sid)
	})

	t.Run("bodies over the limit", func(t *testing.T) { frontBodyLimits(t, alice, "a-token") })
	t.Run("compressed bodies", func(t *testing.T) { frontCompressedBodies(t, alice, "a-token") })
	t.Run("held-back bodies the front refuses", func(t *testing.T) { frontRefusesHeldBackBodies(t, alice, "a-token") })
	t.Run("uploads that break off", func(t *testing.T) { frontBrokenUploads(t, w, alice, "a-token") })
	t.Run("browser origins", func(t *testing.T) { frontOrigins(t, alice) })
	t.Run("header values with whitespace around them", func(t *testing.T) { frontHeaderWhitespace(t, alice, "a-token") })
	t.Run("list's created_at", func(t *testing.T) { frontCreatedAt(t, alice) })
	t.Run("README walk-through", func(t *testing.T) { frontWalkThrough(t, alice) })

	// Two principals whose names differ only in case are two principals,
	// as on the local server (REVENANT_TOKENS' names are compared as
	// written): each has a directory of its own, so neither lists nor
	// reaches the other's trees.
	t.Run("principals differing only in case are apart", func(t *testing.T) {
		capAlice := w.as(t, "cap-a-token")
		capSid, sid := capAlice.create(), alice.create()
		assert.Contains(t, capAlice.listed(), capSid)
		assert.NotContains(t, capAlice.listed(), sid)
		assert.NotContains(t, alice.listed(), capSid)
		assert.Equal(t, http.StatusNotFound, frontStatus(t, alice, "GET", "/v1/sessions/"+capSid))
		assert.Equal(t, http.StatusNotFound, frontStatus(t, capAlice, "GET", "/v1/sessions/"+sid))
	})

	// A spare Go program costs isolate time and memory, so objects start
	// one only with REVENANT_SPARE = "on" (durableobject/shim.js), which
	// this Worker does not set. By now every subtest above has booted
	// objects, each of which would have started one a moment after its
	// boot, and the tests' build says when one is ready.
	t.Run("no spare unless REVENANT_SPARE is on", func(t *testing.T) {
		assert.NotContains(t, w.logs.String(), "revenant test: a spare Go program is ready")
	})
}

// frontWalkThrough is the README's curl walk-through through the front:
// create, prompt, the event stream following the turn live, snapshot,
// interrupt, list, delete.
func frontWalkThrough(t *testing.T, s *server) {
	sid := s.create()
	st := s.follow(sid, 0)
	text := "one two three four five six seven eight nine ten eleven twelve"
	a := s.prompt(sid, text)
	var firstDelta time.Time
	end := st.until("the turn's end", func(e ev) bool {
		if e.Type == typeDelta && firstDelta.IsZero() {
			firstDelta = time.Now()
		}
		return endOf(a)(e)
	})
	ended := time.Now()
	require.Equal(t, typeSucceeded, end.Type, "%s", describe(st.log))
	require.False(t, firstDelta.IsZero(), "text deltas streamed")
	// 13 words at 30 ms each: a stream passed through unbuffered shows the
	// first word well before the turn's end.
	assert.Greater(t, ended.Sub(firstDelta), 150*time.Millisecond, "the stream follows the turn live (not buffered to its end)")
	st.close()

	sn := s.snapshot(sid)
	assert.Equal(t, sid, sn.ID)
	require.NotEmpty(t, sn.Messages)
	assert.Equal(t, "You said: "+text, sn.Messages[len(sn.Messages)-1].Text)

	st = s.follow(sid, sn.Cursor)
	b := s.prompt(sid, "/sleep 1m\nThis answer never comes.")
	st.until("the sleeping step", forPrompt(typeStepStarted, b))
	require.True(t, s.interrupt(sid))
	st.until("the interrupt", forPrompt(typeInterrupted, b))
	st.close()

	// A cursor past the session's last event is refused by the object, as
	// locally: a stream from it would never send a stored event.
	past := strconv.FormatInt(s.snapshot(sid).Cursor+1, 10)
	code, body := frontRaw(t, s, "GET", "/v1/sessions/"+sid+"/events?after="+past)
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)
	assert.Contains(t, body, "after "+past+" is past the session's last event")
	code, body = frontRaw(t, s, "GET", "/v1/sessions/"+sid+"/events", "Last-Event-ID", past)
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)
	assert.Contains(t, body, "Last-Event-ID "+past+" is past the session's last event")

	assert.Contains(t, s.listed(), sid)
	s.do("DELETE", "/v1/sessions/"+sid, nil, http.StatusNoContent, nil)
	assert.False(t, slices.Contains(s.listed(), sid), "deleted trees leave the list")
	code, body = frontRaw(t, s, "GET", "/v1/sessions/"+sid)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
}

// TestWorkerdMalformedTokens: a REVENANT_TOKENS that does not parse (the
// second entry has no token) serves nobody: every request, /healthz
// included, is a 500 that says the front did not start, no tree object is
// created, and the Worker's log names the bad entry by position without
// printing any token.
func TestWorkerdMalformedTokens(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", "REVENANT_TOKENS:alice:secret-token-1,secret-entry-2")
	alice := w.as(t, "secret-token-1")
	before := w.treeFiles(t)
	for _, rq := range []struct{ method, path string }{
		{"GET", "/healthz"},
		{"GET", "/v1/sessions"},
		{"POST", "/v1/sessions"},
		{"GET", "/v1/sessions/abc"},
	} {
		code, body := frontRaw(t, alice, rq.method, rq.path)
		assert.Equal(t, http.StatusInternalServerError, code, "%s %s", rq.method, rq.path)
		assert.JSONEq(t, `{"error":{"type":"internal","message":"the front did not start; see the Worker's log"}}`, body, "%s %s", rq.method, rq.path)
	}
	assert.Equal(t, before, w.treeFiles(t), "no tree object was created")
	w.waitLog(t, "REVENANT_TOKENS: entry 2 (counting from 1, comma-separated) is not principal:token", waitTimeout)
	assert.NotContains(t, w.logs.String(), "secret-token-1", "the log never prints a token")
	assert.NotContains(t, w.logs.String(), "secret-entry-2", "the log never prints a token")
}

// readmeTools is README's REVENANT_TOOLS example: a webhook whose signing
// secret is the Worker secret TICKETS_SECRET.
const readmeTools = `{"webhook_tools":[{"name":"create_ticket","description":"Open a ticket.","url":"https://tickets.example.com/hook","secret_env":"TICKETS_SECRET"}]}`

// TestWorkerdMisconfiguredObject: with README's REVENANT_TOOLS and no
// TICKETS_SECRET every tree object's boot fails for its configuration. A
// create is then a 500 that says so, every time, not a 503 asking for a
// retry that cannot help; the front itself serves; the log names the
// secret and where to set it. A tree created before the vars changed
// answers the same once its object boots again (the shim's constructor).
func TestWorkerdMisconfiguredObject(t *testing.T) {
	t.Parallel() // see workerd_test.go
	const misconfigured = `{"error":{"type":"internal","message":"the session's object did not start: its configuration is invalid; see the Worker's log"}}`
	w := startWorkerd(t)
	s := w.client(t)
	sid := s.create()

	w.vars = append(w.vars, "REVENANT_TOOLS:"+readmeTools)
	w.restart(t)
	code, body := frontRaw(t, s, "GET", "/v1/sessions/"+sid)
	assert.Equal(t, http.StatusInternalServerError, code, "%s", body)
	assert.JSONEq(t, misconfigured, body, "an existing tree")
	for i := range 2 {
		code, body := frontRaw(t, s, "POST", "/v1/sessions")
		assert.Equal(t, http.StatusInternalServerError, code, "create %d: %s", i, body)
		assert.JSONEq(t, misconfigured, body, "create %d", i)
	}
	code, body = frontRaw(t, s, "GET", "/healthz")
	assert.Equal(t, http.StatusOK, code, "%s", body)
	code, body = frontRaw(t, s, "GET", "/v1/sessions")
	assert.Equal(t, http.StatusOK, code, "%s", body)
	w.waitLog(t, "the Worker secret TICKETS_SECRET is not set (wrangler secret put TICKETS_SECRET; for make dev, a line TICKETS_SECRET=… in .dev.vars)", waitTimeout)
}

// TestWorkerdMisconfigurationKeepsTheAlarm: a turn cut by a kill whose
// object then wakes under a misconfigured deploy is not lost. The alarm's
// object cannot boot, so the alarm fails (the object aborts) and workerd
// retries it on fresh objects instead of counting it delivered; once the
// configuration is mended, the next start's alarm finishes the turn with
// no client request. Built with the test routes for the line an alarm
// handler logs as it returns (shim.js): a handler that returned instead
// of aborting fails the test as it returns, not a minute later.
func TestWorkerdMisconfigurationKeepsTheAlarm(t *testing.T) {
	t.Parallel() // see workerd_test.go
	const reason = "the Worker secret TICKETS_SECRET is not set"
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 2s\nI outlast a bad deploy.")
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()

	good := w.vars
	w.vars = append(append([]string(nil), good...), "REVENANT_TOOLS:"+readmeTools)
	w.restart(t) // killed mid-turn; deployed without the secret its tools need
	// No request: the alarm alone constructs the object, and again for
	// each retry of the alarm it could not handle; a handler that
	// returned used the alarm up, and no retry follows.
	w.waitLog(t, reason, time.Minute)
	from := strings.Index(w.logs.String(), reason) + len(reason)
	first := w.waitFirstLog(t, from, time.Minute, reason, alarmReturned+sid)
	require.Equal(t, reason, first, "the misconfigured object's alarm handler returned, its alarm used up, instead of aborting for a retry")

	w.vars = good
	w.restart(t)
	w.resumedByAlarm(t, sid)
	sum := s.settle(sid, a)
	ta := sum.requireEnd(t, a, typeSucceeded, "")
	require.Len(t, ta.resumes, 1, "resumed once, by the alarm of the mended deploy:%s", describe(sum.log))
}

// TestWorkerdListPagesThroughTies: the Directory pages by (created_at
// DESC, root_id), so trees recorded with one created_at (a burst of
// creates within a millisecond) each appear once across pages of one,
// in root id order: a cursor that skipped past its created_at would
// lose every tree but the first of the tie. The test build's
// REVENANT_TEST_CREATED_AT records every tree with one time.
func TestWorkerdListPagesThroughTies(t *testing.T) {
	t.Parallel() // see workerd_test.go
	const tie = 1767225600000
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TOKENS:"+frontTokens, "REVENANT_TEST_CREATED_AT:"+strconv.Itoa(tie))
	alice := w.as(t, "a-token")
	created := []string{alice.create(), alice.create(), alice.create()}
	slices.Sort(created)

	type page struct {
		Sessions []struct {
			ID        string `json:"id"`
			CreatedAt int64  `json:"created_at"`
		} `json:"sessions"`
		NextCursor string `json:"next_cursor"`
	}
	var seen []string
	cursor, pages := "", 0
	for range len(created) + 1 {
		var p page
		alice.do("GET", "/v1/sessions?limit=1"+cursor, nil, http.StatusOK, &p)
		pages++
		for _, s := range p.Sessions {
			assert.Equal(t, int64(tie), s.CreatedAt, s.ID)
			seen = append(seen, s.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + p.NextCursor
	}
	assert.Equal(t, created, seen, "every tree of the tie once, by root id")
	assert.Equal(t, len(created), pages, "the page holding the last tree has no cursor (docs/api.md: next_cursor is empty on the last page)")

	// A last page exactly full has no cursor either.
	var all page
	alice.do("GET", "/v1/sessions?limit=3", nil, http.StatusOK, &all)
	assert.Len(t, all.Sessions, 3)
	assert.Empty(t, all.NextCursor, "three trees, a page of three: nothing after it")
}

// TestWorkerdObjectSeesNoCredentials: the front answers for the client's
// bearer token and passes the tree's object only who the caller is; the
// token itself never reaches the object (nor its logs), whatever route.
// The test build's /test/headers answers the header names the object
// received.
func TestWorkerdObjectSeesNoCredentials(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "revenant_testroutes", "REVENANT_TOKENS:"+frontTokens)
	alice := w.as(t, "a-token")
	sid := alice.create()
	var got struct {
		Headers []string `json:"headers"`
	}
	// The client also sends headers of the front's namespace: none of its
	// own reach the object (the principal the object reads is the front's).
	alice.client = &http.Client{Transport: withHeaders{bearer("a-token"), map[string]string{
		"X-Revenant-Principal": "bob", "X-Revenant-Created-At": "1", "X-Revenant-Debug": "on"}}}
	alice.do("POST", "/v1/sessions/"+sid+"/test/headers", nil, http.StatusOK, &got)
	require.NotEmpty(t, got.Headers)
	assert.NotContains(t, got.Headers, "authorization", "the client's bearer token stays at the front")
	assert.Contains(t, got.Headers, "x-revenant-principal", "the front names the caller instead")
	assert.NotContains(t, got.Headers, "x-revenant-created-at")
	assert.NotContains(t, got.Headers, "x-revenant-debug")
	alice.do("GET", "/v1/sessions/"+sid, nil, http.StatusOK, nil) // still alice's: the principal was the front's
}

// withHeaders sets fixed headers on every request, then sends it by next.
type withHeaders struct {
	next    http.RoundTripper
	headers map[string]string
}

func (h withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, value := range h.headers {
		r.Header.Set(name, value)
	}
	return h.next.RoundTrip(r)
}

// frontRefusesHeldBackBodies: a request the front refuses itself (a 401,
// a malformed id, a refused Origin) or after the owner check (an unknown
// session) is answered at once though its client declares a body and
// holds it back, as the local server answers it (docs/api.md, Read
// timeout): the front drops the body it will not read. Probe 63 found no
// answer at all for each under wrangler dev (its proxy waited for the
// body), while an interrupt, whose body the front drops, was answered.
func frontRefusesHeldBackBodies(t *testing.T, s *server, token string) {
	sid := s.create()
	for _, rq := range []struct {
		token, extra, path string
		status             int
	}{
		{"", "", "/v1/sessions", http.StatusUnauthorized},
		{"wrong-token", "", "/v1/sessions/" + sid + "/prompt", http.StatusUnauthorized},
		{token, "", "/v1/sessions/bad..id/prompt", http.StatusNotFound},
		{token, "", "/v1/sessions/aaaaaaaaaaaaaaaaaaaaaaaaaa/prompt", http.StatusNotFound},
		{token, "Origin: https://evil.example\r\n", "/v1/sessions/" + sid + "/prompt", http.StatusForbidden},
	} {
		code, body := rawPostWith(t, s, rq.token, rq.extra, rq.path, 100, []byte("{"), false)
		assert.Equal(t, rq.status, code, "%s %q: 100 bytes declared, one sent: %s", rq.path, rq.extra, body)
	}
	assert.Empty(t, snapshotAfterUploads(t, s, token, sid).Prompts, "no prompt was admitted")
}

// frontCompressedBodies: a body sent with a Content-Encoding is refused
// 400 naming it, as on the local server: a create by the front, before
// any object exists; a prompt by its tree's object, after the owner
// check; one declared over the limit is 413 first. Nothing is admitted.
func frontCompressedBodies(t *testing.T, s *server, token string) {
	sid := s.create()
	gzipped := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
	for _, path := range []string{"/v1/sessions", "/v1/sessions/" + sid + "/prompt"} {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		req, err := http.NewRequestWithContext(ctx, "POST", s.url+path, strings.NewReader(gzipped))
		require.NoError(t, err)
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := s.client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, b)
		assert.Contains(t, string(b), "Content-Encoding", path)
	}
	// Declared over the limit, compressed or not, it is 413 unread, as on
	// the local server (probe 63: a create was 400 here, a prompt 413).
	for _, path := range []string{"/v1/sessions", "/v1/sessions/" + sid + "/prompt"} {
		code, body := rawPostWith(t, s, token, "Content-Encoding: gzip\r\n", path, 64<<20, nil, false)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: gzip, 64 MiB declared, none sent: %s", path, body)
		assert.JSONEq(t, tooLargeBody, body, path)
	}
	assert.Empty(t, snapshotAfterUploads(t, s, token, sid).Prompts, "no prompt was admitted")
}
