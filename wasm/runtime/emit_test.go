package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// faultSeq makes the tests' VFS names unique in the test binary.
var faultSeq atomic.Uint64

// newFaultEnv is newEnv over a connection opened through a fault VFS whose
// windows follow the services' virtual clock.
func newFaultEnv(t *testing.T, seed uint64, cfg runtime.BootConfig) (*env, *faultvfs.Fault) {
	t.Helper()
	return newFaultEnvWith(t, seed, cfg, sqlitedb.Options{})
}

// newFaultEnvWith is newFaultEnv with the guest's database opened with
// opts (its VFS set to the fault one): BusyTimeout -1 makes it wait for
// no lock, as a connection whose busy timeout is spent.
func newFaultEnvWith(t *testing.T, seed uint64, cfg runtime.BootConfig, opts sqlitedb.Options) (*env, *faultvfs.Fault) {
	t.Helper()
	if cfg.TreeID == "" {
		cfg.TreeID = treeID
	}
	s := newServices(seed)
	f := faultvfs.New(func() int64 { return s.now })
	name := fmt.Sprintf("runtime-test-fault-%d", faultSeq.Add(1))
	faultvfs.Register(name, f)
	path := filepath.Join(t.TempDir(), "tree.db")
	opts.VFS = name
	db, err := sqlitedb.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		db.Close()
		faultvfs.Unregister(name)
	})
	return &env{t: t, path: path, db: db, conn: db.Conn(), s: s, cfg: cfg}, f
}

// rivalConn is a second connection to the database at path, for a test
// that takes the write lock away from the guest's; whatever transaction
// it left open is rolled back at the test's end.
func rivalConn(t testing.TB, path string) *sqlitedb.Conn {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	other := db.Conn()
	t.Cleanup(func() {
		if other.InTx() {
			_ = other.Rollback()
		}
		db.Close()
	})
	return other
}

// loggedIDs are the ids of every stored event, in commit order (gseq).
func (e *env) loggedIDs() []string {
	e.t.Helper()
	var ids []string
	err := e.db.Tx(context.Background(), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT id FROM events ORDER BY gseq`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	require.NoError(e.t, err)
	return ids
}

// emittedIDs are the ids of the durable events emitted so far, in order.
func (s *services) emittedIDs() []string {
	var ids []string
	for _, ev := range s.emits {
		if ev.Durable() {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

// A commit that is durable but reported failed (a late IOERR) is found
// stored by core's rerun, which then writes nothing: its events must still
// reach emit, once, before anything committed after them (docs/abi.md §4).
// Here every commit of the turn is reported failed after it reached the
// disk.
func TestLateIOErrCommitsAreEmittedOnceInCommitOrder(t *testing.T) {
	e, f := newFaultEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("hello late commits")
	require.Equal(t, e.loggedIDs(), e.s.emittedIDs(), "before any fault")

	f.FailLateCommits(1_000, faultvfs.IOErrFsync)
	e.fireTimers(10 * 60_000)
	f.Heal()

	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	assert.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
	require.Positive(t, f.LateCommits(), "no commit was reported failed late")
	assert.Equal(t, e.loggedIDs(), e.s.emittedIDs(), "every durable event emitted once, in commit order")
}

// A sub-agent's session is created by a commit, not by a create request:
// its live deltas reach emit too, under its own session id.
func TestChildSessionDeltasAreEmitted(t *testing.T) {
	e := newEnv(t, 5, openaiConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	var ids []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) { ids = append(ids, id) }
	e.createAndPrompt("delegate")
	require.Len(t, ids, 1)
	e.answerToolCall(ids[0], "task", `{"prompt":"sub"}`)
	require.Len(t, ids, 2, "the sub-agent asked the model")
	e.answer(ids[1],
		`data: {"choices":[{"delta":{"content":"child says hi"},"finish_reason":"stop"}]}`,
		`data: [DONE]`)
	var texts []string
	for _, ev := range e.s.emitted("session.text.delta@1") {
		require.NotEqual(t, treeID, ev.SessionID, "the root streamed no text")
		var d struct{ Text string }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		texts = append(texts, d.Text)
	}
	require.Equal(t, []string{"child says hi"}, texts)
}

// A guest booted over an existing tree watches the sessions it finds:
// their live deltas reach emit, though no create ran in this guest.
func TestSessionsOfAnEarlierGuestEmitTheirDeltas(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())
	require.NoError(t, e.g.Close(context.Background()))

	b := e.sibling(2)
	require.NoError(t, b.boot(runtime.Options{}))
	r = b.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after a restart", "id": "p1"})
	require.Equal(t, 202, r.status, r.body.String())
	b.fireTimers(60_000)
	require.Equal(t, "idle", b.snapshot().Status)
	require.NotEmpty(t, b.s.emitted("session.text.delta@1"))
}
