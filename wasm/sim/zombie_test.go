package sim

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A zombie's commit past the fence is caught at its connection, even one
// that no durable event (and so no emit) follows, such as a claim released.
func TestZombieCommitWithoutEventIsCaught(t *testing.T) {
	c, err := openConn(filepath.Join(t.TempDir(), "tree.db"), "")
	require.NoError(t, err)
	defer c.close()
	exec := func(q string) {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	for _, q := range []string{`CREATE TABLE tree (singleton INTEGER PRIMARY KEY, epoch INTEGER NOT NULL)`, `INSERT INTO tree VALUES (1, 1)`,
		`CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, gseq INTEGER)`, `CREATE TABLE claims (session_id TEXT)`,
		`INSERT INTO claims VALUES ('s')`} {
		exec(q)
	}
	tr := &tree{owners: map[int64]int{1: 1}, boots: 1}
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
	_, err = c.Query(`SELECT * FROM claims`, nil)
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
	c, err := openConn(filepath.Join(t.TempDir(), "tree.db"), "")
	require.NoError(t, err)
	defer c.close()
	exec := func(q string) {
		_, err := c.Exec(q, nil)
		require.NoError(t, err, q)
	}
	for _, q := range []string{`CREATE TABLE tree (singleton INTEGER PRIMARY KEY, epoch INTEGER NOT NULL)`, `INSERT INTO tree VALUES (1, 1)`,
		`CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, gseq INTEGER)`} {
		exec(q)
	}
	tr := &tree{owners: map[int64]int{1: 1}, boots: 2} // boot 2 is read-only: epoch 1 is still boot 1's
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
