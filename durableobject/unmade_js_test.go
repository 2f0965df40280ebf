//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// unmade deletes a tree only when its root session is known never to have
// been created (api.ErrTreeNotFound). A DELETE of the root that reaches an
// object whose storage cannot read the root session (a transient failure)
// leaves the tree alone: the delete's own owner check answers it (503), and
// the client's retry finds the tree as it was. Deleted there, a tree whose
// owner was never checked would be gone.
func TestUnmadeLeavesATreeWhoseRootCannotBeRead(t *testing.T) {
	store, calls := newAlarmStandIn(t, 0)
	db, err := sqlitedb.Open("file:"+filepath.Join(t.TempDir(), "tree.db")+"?vfs="+lockFreeVFS+"&_pragma=locking_mode(exclusive)", sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	flaky := &failingDB{DB: db}
	clock := fakehost.NewClock(1767225600000)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	host := core.Host{DB: flaky, Clock: clock, Wake: store, IDs: &fakehost.IDs{Prefix: "id"}, Log: quiet}
	inst, _, err := recovery.Boot(context.Background(), host, core.NewConfig(), &retryDriver{clock: clock})
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	ctx := context.Background()
	_, err = inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "tester"})
	require.NoError(t, err)
	o := &Object{treeID: "root", log: quiet, alarm: store, inst: inst}

	flaky.fail.Store(true)
	r, err := httpmsg.NewRequest(ctx, httpmsg.MethodDelete, "https://object/v1/sessions/root", nil)
	require.NoError(t, err)
	var deleting any
	func() {
		defer func() { deleting = recover() }() // this Object has no handler or storage to delete
		o.unmade(ctx, r)
	}()
	assert.Nil(t, deleting, "unmade went on to delete the tree")
	assert.False(t, o.isDeleted())
	assert.False(t, inst.Closed(), "the tree's instance was closed")
	assert.Empty(t, calls(), "the tree's alarm was touched")
}
