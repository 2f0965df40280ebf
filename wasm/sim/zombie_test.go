package sim

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// A zombie's commit past the fence is caught at its connection, even one
// that no durable event (and so no emit) follows, such as a claim released.
func TestZombieCommitWithoutEventIsCaught(t *testing.T) {
	tr, c := newZombieTree(t, "")
	exec := func(q string) {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	exec(`CREATE TABLE claims (session_id TEXT)`)
	exec(`INSERT INTO claims VALUES ('s')`)
	tr.owners[1], tr.boots = 1, 1
	g := &guest{t: tr, boot: 1, conn: c}
	g.watch()

	// Its own commits before it is superseded are no zombie's.
	require.NoError(t, c.Begin())
	exec(`INSERT INTO events VALUES ('s', 1, 'session.created@1', 1)`)
	require.NoError(t, c.Commit())
	require.Empty(t, tr.ledger.ZombieCommits)

	// Abandoned; its successor boots and takes epoch 2.
	g.zombie = true
	tr.boots, tr.owners[2] = 2, 2
	exec(`UPDATE tree SET epoch = 2`)

	require.NoError(t, c.Begin())
	exec(`DELETE FROM claims`)
	require.NoError(t, c.Commit())
	require.Len(t, tr.ledger.ZombieCommits, 1, "a commit past the fence, though nothing was emitted")
	z := tr.ledger.ZombieCommits[0]
	require.Equal(t, 1, z.Boot)
	require.Equal(t, 2, z.Latest)
	require.Contains(t, z.What, "1 row changes")

	// A transaction that wrote nothing committed nothing.
	require.NoError(t, c.Begin())
	_, err := c.Query(`SELECT * FROM claims`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Commit())
	require.Len(t, tr.ledger.ZombieCommits, 1)
}

// A zombie's egress past the fence is recorded too: the host owns egress
// and must not let a superseded instance call a tool again.
func TestZombieEgressIsCaught(t *testing.T) {
	c, err := openConn(filepath.Join(t.TempDir(), "tree.db"), "")
	require.NoError(t, err)
	defer c.close()
	for _, q := range []string{`CREATE TABLE tree (singleton INTEGER PRIMARY KEY, epoch INTEGER NOT NULL)`, `INSERT INTO tree VALUES (1, 1)`,
		`CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, gseq INTEGER)`} {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	tr := &tree{owners: map[int64]int{1: 1}, boots: 1, rng: rand.New(rand.NewPCG(1, 1)), path: filepath.Join(t.TempDir(), "none.db")}
	g := &guest{t: tr, boot: 1, conn: c, egress: map[uint64]*reply{}}
	call := abi.ToolCall{ID: "call1", Name: toolIHook, Arguments: []byte(`{}`), IdempotencyKey: "k1", SessionID: "s"}
	req := runtime.EgressRequest{Kind: abi.EgressTool, Target: toolIHook, Method: "POST", Body: call.Encode()}

	g.StartEgress(1, req)
	require.Empty(t, tr.ledger.ZombieCommits, "its own egress while it holds the epoch")

	g.zombie = true
	tr.boots, tr.owners[2] = 2, 2
	_, err = c.Exec(`UPDATE tree SET epoch = 2`, nil)
	require.NoError(t, err)
	g.StartEgress(2, req)
	require.Len(t, tr.ledger.ZombieCommits, 1)
	require.Contains(t, tr.ledger.ZombieCommits[0].What, "egress_start to ihook")
}

// A successor that booted read-only (storage full) took no epoch, so it
// fences nobody yet: an older guest that takes the next epoch first owns
// the tree (core then refuses the successor's late epoch), and its commits
// are no zombie's. Judging by boot order alone flagged them.
func TestOlderGuestTakingTheEpochBeforeAReadOnlySuccessorIsNoZombie(t *testing.T) {
	tr, c := newZombieTree(t, "")
	exec := func(q string) {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	tr.owners[1], tr.boots = 1, 2 // boot 2 is read-only: epoch 1 is still boot 1's
	g := &guest{t: tr, boot: 1, conn: c, zombie: true}
	g.watch()

	require.NoError(t, c.Begin())
	exec(`UPDATE tree SET epoch = 2`) // the older guest takes the next epoch
	require.NoError(t, c.Commit())
	require.NoError(t, c.Begin())
	exec(`INSERT INTO events VALUES ('s', 1, 'session.created@1', 1)`)
	require.NoError(t, c.Commit())
	require.Empty(t, tr.ledger.ZombieCommits)
	require.Equal(t, 1, tr.owners[2])
}

// newZombieTree is a tree for the zombie tests: a database with the tables
// the simulator reads (epoch 1, an empty log) through the VFS named vfs
// ("" the OS's), and the connection of its first guest. The tree's own
// read-only connection, which tells what is committed, is closed at the
// end.
func newZombieTree(t *testing.T, vfs string) (*tree, *conn) {
	path := filepath.Join(t.TempDir(), "tree.db")
	c, err := openConn(path, vfs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.close() })
	for _, q := range []string{`CREATE TABLE tree (singleton INTEGER PRIMARY KEY, epoch INTEGER NOT NULL)`, `INSERT INTO tree VALUES (1, 1)`,
		`CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, gseq INTEGER)`} {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	tr := &tree{path: path, owners: map[int64]int{}, ledger: check.Ledger{Emits: &check.Emits{From: map[int]int64{}}}}
	t.Cleanup(func() {
		if tr.obs != nil {
			_ = tr.obs.Close()
		}
	})
	return tr, c
}

// The seed 3 case (tree0016): an older guest booted read-only takes its
// epoch late with a COMMIT that is durable but reported failed (a late
// IOERR); its retry finds the epoch marked as its own and writes nothing.
// The epoch is that guest's: a successor that boots read-only afterwards
// only reads it, and the older guest's commits until the successor takes
// the next epoch are no zombie's. Crediting the epoch to the successor
// that read it reported seven zombie commits core had rightly allowed. A
// COMMIT that failed before it was durable takes nothing, and a commit of
// the older guest after the successor's epoch is still caught.
func TestEpochTakenByALateIOErrCommitIsItsGuests(t *testing.T) {
	fault := faultvfs.New(func() int64 { return 0 })
	vfs := "sim-late-epoch-" + t.Name()
	faultvfs.Register(vfs, fault)
	t.Cleanup(func() { faultvfs.Unregister(vfs) }) // after every connection closed
	tr, c1 := newZombieTree(t, vfs)
	c2, err := openConn(tr.path, vfs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.close() })
	tr.owners[1], tr.boots = 1, 2 // epoch 1 is boot 1's
	g2 := &guest{t: tr, boot: 2, conn: c1}
	g2.watch()
	write := func(c *conn, q string) error {
		require.NoError(t, c.Begin())
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
		if err := c.Commit(); err != nil {
			return errors.Join(err, c.Rollback())
		}
		return nil
	}

	// Boot 2, read-only since boot, takes epoch 2: durable, reported failed.
	fault.FailLateCommits(1, faultvfs.IOErrFsync)
	require.Error(t, write(c1, `UPDATE tree SET epoch = 2`))
	require.Equal(t, 1, fault.LateCommits())
	require.Equal(t, 2, tr.owners[2], "the epoch a late IOERR made durable is its guest's")

	// Boot 2 is abandoned; boot 3 boots read-only: its epoch write fails
	// before it is durable, so epoch 2 stays boot 2's.
	g2.zombie = true
	tr.boots = 3
	g3 := &guest{t: tr, boot: 3, conn: c2}
	g3.watch()
	fault.FailNext(1, faultvfs.IOErrWrite)
	require.Error(t, write(c2, `UPDATE tree SET epoch = 3`))
	_, taken := tr.owners[3]
	require.False(t, taken, "a COMMIT that failed before it was durable took no epoch")

	// Boot 2 still holds the tree's epoch: its commits are legal.
	require.NoError(t, write(c1, `INSERT INTO events VALUES ('s', 1, 'session.prompt.admitted@1', 1)`))
	require.Empty(t, tr.ledger.ZombieCommits)

	// Boot 3 takes epoch 3 with its first accepted write; from then on a
	// commit of boot 2's is past the fence.
	require.NoError(t, write(c2, `UPDATE tree SET epoch = 3`))
	require.Equal(t, 3, tr.owners[3])
	require.NoError(t, write(c1, `INSERT INTO events VALUES ('s', 2, 'session.step.started@1', 2)`))
	require.Len(t, tr.ledger.ZombieCommits, 1)
	require.Equal(t, 2, tr.ledger.ZombieCommits[0].Boot)
	require.Equal(t, 3, tr.ledger.ZombieCommits[0].Latest)
}

// A zombie's commit past the fence that is durable but reported failed (a
// late IOERR) is caught by the events it left: the connection's commit
// hook hears only of commits reported done.
func TestZombieCommitReportedFailedIsCaught(t *testing.T) {
	fault := faultvfs.New(func() int64 { return 0 })
	vfs := "sim-late-zombie-" + t.Name()
	faultvfs.Register(vfs, fault)
	t.Cleanup(func() { faultvfs.Unregister(vfs) }) // after every connection closed
	tr, c := newZombieTree(t, vfs)
	tr.owners[1], tr.owners[2], tr.boots = 1, 2, 2 // boot 2 took epoch 2
	_, err := c.Exec(`UPDATE tree SET epoch = 2`, nil)
	require.NoError(t, err)
	g := &guest{t: tr, boot: 1, conn: c, zombie: true}
	g.watch()

	fault.FailLateCommits(1, faultvfs.IOErrFsync)
	require.NoError(t, c.Begin())
	_, err = c.Exec(`INSERT INTO events VALUES ('s', 1, 'session.step.started@1', 1)`, nil)
	require.NoError(t, err)
	require.Error(t, c.Commit())
	require.NoError(t, c.Rollback())
	require.Equal(t, 1, fault.LateCommits())
	require.Len(t, tr.ledger.ZombieCommits, 1)
	z := tr.ledger.ZombieCommits[0]
	require.Equal(t, 1, z.Boot)
	require.Equal(t, 2, z.Latest)
	require.Contains(t, z.What, "reported failed but durable, session.step.started@1 #1 of s")
}

// The receivers apply calls as the tools are declared: hook and ahook
// apply a call sent again (they do not deduplicate, so a second delivery
// is a second effect, which effects-once judges), ihook applies a key
// once and answers a repeat without applying it.
func TestReceiversApplyAsDeclared(t *testing.T) {
	tr, c := newZombieTree(t, "")
	tr.rng = rand.New(rand.NewPCG(1, 2))
	tr.owners[1], tr.boots = 1, 1
	g := &guest{t: tr, boot: 1, conn: c, egress: map[uint64]*reply{}}
	id := uint64(0)
	for _, tool := range []string{toolHook, toolAHook, toolIHook} {
		call := abi.ToolCall{ID: "call-" + tool, Name: tool, Arguments: []byte(`{}`), IdempotencyKey: "key-" + tool, SessionID: "s"}
		for range 10 {
			id++
			g.StartEgress(id, runtime.EgressRequest{Kind: abi.EgressTool, Target: tool, Method: "POST", Body: call.Encode()})
		}
	}
	delivered, applied := map[string]int{}, map[string]int{}
	for _, d := range tr.ledger.Deliveries {
		delivered[d.Tool]++
		if d.Applied {
			applied[d.Tool]++
		}
	}
	for _, tool := range []string{toolHook, toolAHook, toolIHook} {
		require.Greater(t, delivered[tool], 1, "%s: some of the ten reached the receiver", tool)
	}
	require.Equal(t, delivered[toolHook], applied[toolHook], "hook applies every delivery")
	require.Equal(t, delivered[toolAHook], applied[toolAHook], "ahook applies every delivery")
	require.Equal(t, 1, applied[toolIHook], "ihook applies its key once")
}
