package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// rootSession is a create's init: the tree's root session, as the API's
// create makes it.
func rootSession(id, principal string) func(*core.Instance) error {
	return func(inst *core.Instance) error {
		_, err := inst.CreateSession(ctx, core.NewSession{ID: id, Principal: principal})
		return err
	}
}

func listIDs(t *testing.T, h *host.Host, principal string) []string {
	t.Helper()
	trees, _, err := h.List(ctx, principal, "", 50)
	require.NoError(t, err)
	return rootIDs(trees)
}

// A create retried with its key answers the first create's tree, creates
// nothing, and does so after a restart too (the key is in the index);
// the key is the principal's own.
func TestCreateKeyedRetryAnswersTheFirstTree(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	key := api.CreateKey{Key: "create-1", Digest: "d1"}

	id, err := h.CreateKeyed(ctx, "t1", "alice", key, rootSession("t1", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t1", id)

	id, err = h.CreateKeyed(ctx, "t2", "alice", key, func(*core.Instance) error {
		t.Error("a retry's init ran")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "t1", id, "the retry is answered the first create's tree")
	_, err = h.Owner(ctx, "t2")
	assert.ErrorIs(t, err, api.ErrTreeNotFound, "the retry made no tree")
	assert.Equal(t, []string{"t1"}, listIDs(t, h, "alice"))

	// Bob's key of the same name is his own.
	id, err = h.CreateKeyed(ctx, "t3", "bob", key, rootSession("t3", "bob"))
	require.NoError(t, err)
	assert.Equal(t, "t3", id)

	require.NoError(t, h.Close(ctx))
	h = e.open(e.config())
	id, err = h.CreateKeyed(ctx, "t4", "alice", key, rootSession("t4", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t1", id, "the key outlives the server")
	assert.Equal(t, []string{"t1"}, listIDs(t, h, "alice"))
}

// The same key with another body is 409 conflict naming the key; a key
// whose tree was deleted stays spent (409, no new tree).
func TestCreateKeyedConflicts(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	key := api.CreateKey{Key: "create-1", Digest: "d1"}
	_, err := h.CreateKeyed(ctx, "t1", "alice", key, rootSession("t1", "alice"))
	require.NoError(t, err)

	_, err = h.CreateKeyed(ctx, "t2", "alice", api.CreateKey{Key: "create-1", Digest: "d2"}, rootSession("t2", "alice"))
	require.Error(t, err)
	assert.Equal(t, 409, api.StatusOf(err))
	assert.Contains(t, api.ErrorOf(err).Message, `"create-1" was used with a different request body`)

	require.NoError(t, h.Delete(ctx, "t1"))
	_, err = h.CreateKeyed(ctx, "t3", "alice", key, rootSession("t3", "alice"))
	require.Error(t, err)
	assert.Equal(t, 409, api.StatusOf(err))
	assert.Contains(t, api.ErrorOf(err).Message, `"create-1" created session t1, since deleted`)
	assert.Empty(t, listIDs(t, h, "alice"), "a spent key makes no tree")
}

// A create that failed leaves its key free: it made no tree, and a retry
// with the key creates one.
func TestCreateKeyedFailedCreateFreesTheKey(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	key := api.CreateKey{Key: "k", Digest: "d"}
	refused := errors.New("refused")
	_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(*core.Instance) error { return refused })
	require.ErrorIs(t, err, refused)

	id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id)
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}

// A server killed between a keyed create's index row and the tree's
// readiness leaves the row not ready and its key: the next Open removes
// both (the tree was never visible, its 201 never sent), and a retry
// with the key creates the tree.
func TestCreateKeyedDiedCreateFreesTheKey(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	require.NoError(t, h.Close(ctx))
	e.execIndex( // what the kill left
		`INSERT INTO trees (id, principal, created_at, ready) VALUES ('t1', 'alice', 1, 0)`,
		`INSERT INTO create_keys (principal, key, tree_id, digest) VALUES ('alice', 'k', 't1', 'd')`)

	h = e.open(e.config())
	id, err := h.CreateKeyed(ctx, "t2", "alice", api.CreateKey{Key: "k", Digest: "d"}, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id)
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}

// Two creates with the same key at once make one tree: the second waits
// for the first's outcome and is answered its tree.
func TestCreateKeyedConcurrentRetryWaitsForTheFirst(t *testing.T) {
	e := newEnv(t)
	waiting := make(chan string, 1)
	h := e.open(host.WithCreateWaitsHook(e.config(), func(id string) { waiting <- id }))
	key := api.CreateKey{Key: "k", Digest: "d"}

	initStarted, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(inst *core.Instance) error {
			close(initStarted)
			<-release
			return rootSession("t1", "alice")(inst)
		})
		first <- err
	}()
	<-initStarted

	second := make(chan string, 1)
	go func() {
		id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
		assert.NoError(t, err)
		second <- id
	}()
	assert.Equal(t, "t1", <-waiting, "the retry waits for the first create's tree")
	close(release)
	require.NoError(t, <-first)
	assert.Equal(t, "t1", <-second)
	assert.Equal(t, []string{"t1"}, listIDs(t, h, "alice"))
}

// A keyed create whose key names a tree an earlier create left not ready
// and could not undo (its cleanup failed too, so nothing holds the tree's
// entry and nothing will finish it) is 503 at once, not read again and
// again until its client gives up (found by review263: the loop took 80%
// of a core, and slowed every other index reader, for as long as the
// client waited). The next start removes that tree and frees the key.
func TestCreateKeyedOnAnUnfinishedCreatesKeyAnswersAtOnce(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.execIndex( // what a create and its failed undo left
		`INSERT INTO trees (id, principal, created_at, ready) VALUES ('t1', 'alice', 1, 0)`,
		`INSERT INTO create_keys (principal, key, tree_id, digest) VALUES ('alice', 'k', 't1', 'd')`)

	// The deadline is a guard that turns a spin into a failure, not a wait.
	guarded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := h.CreateKeyed(guarded, "t2", "alice", api.CreateKey{Key: "k", Digest: "d"}, rootSession("t2", "alice"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 503, api.StatusOf(err), "%v", err)
	assert.Empty(t, listIDs(t, h, "alice"))

	require.NoError(t, h.Close(ctx))
	h = e.open(e.config())
	id, err := h.CreateKeyed(ctx, "t2", "alice", api.CreateKey{Key: "k", Digest: "d"}, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id, "the next start freed the key")
}

// A create whose last index write (the row made ready) is reported failed
// though it is stored, a late I/O error, is undone and answered an error:
// its client never got the tree's id, so its key is free again, as for
// any failed create, not spent by a tree nobody was told of (a retry was
// 409 "created session t1, since deleted").
func TestCreateKeyedLateFailedReadyFreesTheKey(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "createkeylate")
	h := e.open(host.WithVFS(e.config(), "createkeylate"))
	key := api.CreateKey{Key: "k", Digest: "d"}
	_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(inst *core.Instance) error {
		if err := rootSession("t1", "alice")(inst); err != nil {
			return err
		}
		fault.FailLateCommits(1, faultvfs.IOErrFsync) // the next commit: the row made ready
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 1, fault.LateCommits())
	_, err = h.Owner(ctx, "t1")
	require.ErrorIs(t, err, api.ErrTreeNotFound, "the failed create was undone")

	id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id, "the retry creates the tree")
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}

// A create whose index row and key are stored by a commit reported failed
// (a late I/O error) is answered an error, and undoes them as any failed
// create does: a retry with the key creates the tree, rather than finding
// the key held by a row nothing will finish, 503 until the next start.
func TestCreateKeyedLateFailedRowFreesTheKey(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "createkeylaterow")
	h := e.open(host.WithVFS(e.config(), "createkeylaterow"))
	key := api.CreateKey{Key: "k", Digest: "d"}
	fault.FailLateCommits(1, faultvfs.IOErrFsync) // the next commit: the row and its key
	_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(*core.Instance) error {
		t.Error("a create whose row was reported unstored went on")
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 1, fault.LateCommits())

	id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id, "the retry creates the tree")
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}
