package check_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// receivers are the fixture's two ledger tools: hook (not idempotent) and
// ihook (deduplicates by key). A call whose arguments say "block" waits for
// its execution's end while blocking is on, so the fixture can kill or
// interrupt a turn in the middle of a tool body.
type receivers struct {
	mu       sync.Mutex
	ledger   check.Ledger
	clock    interface{ Now() int64 }
	gseq     func() int64 // the tree's commit position
	blocking bool
	entered  chan string
}

// setBlocking turns blocking on or off for the calls that start next.
func (r *receivers) setBlocking(on bool) {
	r.mu.Lock()
	r.blocking = on
	r.mu.Unlock()
}

// rebootUnblocked kills n's instance where it stands (a tool body blocked,
// say), lets the tools run on, and boots the tree again with driver d,
// returning the new node once its recovery ran.
func (r *receivers) rebootUnblocked(tr *treetest.Tree, n *treetest.Node, d core.Driver) *treetest.Node {
	n.Crash()
	n.Idle()
	r.setBlocking(false)
	n = tr.Boot(d)
	n.Idle()
	return n
}

func (r *receivers) tools() []tool.Tool {
	mk := func(name string, idem bool) tool.Tool {
		return tool.Func{DefaultPermission: "allow", Name: name, IsIdempotent: idem, Run: func(ctx context.Context, c tool.Call) (string, error) {
			var args struct{ Block bool }
			_ = json.Unmarshal(c.Arguments, &args)
			r.mu.Lock()
			d := r.ledger.Record(check.Delivery{At: r.clock.Now(), Tool: name, CallID: c.ID, Key: c.IdempotencyKey, Idempotent: idem, Gseq: r.gseq()})
			block := args.Block && r.blocking
			r.mu.Unlock()
			if block {
				r.entered <- c.ID
				<-ctx.Done()
				return "", ctx.Err()
			}
			if d.Applied {
				return "applied", nil
			}
			return "already applied", nil
		}}
	}
	return []tool.Tool{mk("hook", false), mk("ihook", true)}
}

// fixture writes a small tree with everything the rules look at: a clean
// three-step turn with both tools, a turn resumed in an idempotent body
// (re-run, deduplicated), a turn resumed in a non-idempotent body (settled
// with an unknown outcome), and a user interrupt in a tool body with a
// queued prompt cancelled. It returns the file, checkpointed so it can be
// copied alone, and the ledger.
func fixture(t *testing.T) (string, *check.Ledger) {
	t.Helper()
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	rc := &receivers{clock: tr.Clock, gseq: gseq, entered: make(chan string, 1), ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true}}}
	reg, err := tool.NewRegistry(rc.tools()...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	ctx := context.Background()

	n := tr.Boot(r)
	s := n.NewSession("s")
	n.Admit(s, "/tool hook {\"n\":1}\n/tool ihook {\"n\":2}\nhello")
	n.Idle()

	// Killed inside a body, then resumed: the idempotent call runs again
	// with its key, the non-idempotent one settles as unknown.
	for _, p := range []string{"/tool ihook {\"n\":3,\"block\":true}\nagain", "/tool hook {\"n\":4,\"block\":true}\nonce"} {
		rc.setBlocking(true)
		n.Admit(s, p)
		<-rc.entered
		n = rc.rebootUnblocked(tr, n, r)
	}

	// Interrupted inside a body, with a prompt queued behind it.
	u := n.NewSession("u")
	rc.setBlocking(true)
	n.Admit(u, "/tool hook {\"n\":5,\"block\":true}\nstopped")
	<-rc.entered
	n.Admit(u, "never runs")
	sent := gseq()
	did, err := n.Inst.Interrupt(ctx, u, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	rc.mu.Lock()
	rc.ledger.Interrupts = append(rc.ledger.Interrupts, check.Interrupt{Session: u, At: tr.Clock.Now(), Sent: sent, Answered: gseq()})
	rc.mu.Unlock()
	n.Idle()
	n.Crash()

	path, l := written(t, tr, rc)
	return path, l
}

// checkpointed moves a fixture tree's WAL into its main file, so a copy of
// that file alone is the whole tree (copyTree, check.Tree's read-only open).
func checkpointed(t *testing.T, path string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	require.NoError(t, c.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`))
	require.NoError(t, c.Close())
}

// written is a fixture's end, once its last instance is gone: the tree's
// file with its WAL checkpointed in, and a copy of the ledger the
// receivers kept.
func written(t *testing.T, tr *treetest.Tree, rc *receivers) (string, *check.Ledger) {
	t.Helper()
	checkpointed(t, tr.Path)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	l := rc.ledger
	l.Deliveries = append([]check.Delivery(nil), l.Deliveries...)
	return tr.Path, &l
}

// commitPosition reads the tree's commit position (its highest gseq) on
// a plain connection, as the simulator's ledger records it.
func commitPosition(tr *treetest.Tree) func() int64 {
	return func() int64 {
		var n int64
		tr.Read(func(tx storage.Tx) error {
			_, err := storage.QueryRow(tx, `SELECT COALESCE(MAX(gseq), 0) FROM events`, nil, &n)
			return err
		})
		return n
	}
}

// copyTree copies the fixture's file to a fresh path.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "tree.db")
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

// tamper runs SQL on a tree file, the way a bug would have written it.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	for _, s := range stmts {
		require.NoError(t, c.Exec(s), s)
	}
}

var _ core.Driver = (*runner.Runner)(nil)

// violationsOf judges the tree at path with ledger and lists its
// violations of rule.
func violationsOf(t *testing.T, path string, ledger *check.Ledger, rule check.Rule) []string {
	t.Helper()
	res, err := check.Tree(path, ledger, check.Options{Label: "tree"})
	require.NoError(t, err)
	var out []string
	for _, v := range res.Violations {
		if v.Rule == rule {
			out = append(out, v.String())
		}
	}
	return out
}
