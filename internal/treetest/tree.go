package treetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// Start is the fake clock's starting time (2026-01-01T00:00:00Z in ms).
const Start = 1767225600000

// Tree is one tree database file that outlives the instances booted on it.
type Tree struct {
	T     testing.TB
	Path  string
	Clock *fakehost.Clock
	Wake  *fakehost.Waker
	IDs   *fakehost.IDs
	Cfg   core.Config
	// DB are the options of every instance's connection (Host, Boot); Faults
	// sets its VFS. Read always uses a plain connection.
	DB sqlitedb.Options
	// WrapDB, if set, wraps the database of every instance booted from now
	// on, inside the kill wrapper: a test fails chosen statements.
	WrapDB func(storage.DB) storage.DB
	boots  int
	waits  chan retry.Wait
}

// New makes an empty tree in a temporary directory.
// Its instances report their waits for storage, so Drive can move the
// clock through them.
func New(t testing.TB) *Tree {
	tr := &Tree{
		T: t, Path: filepath.Join(t.TempDir(), "tree.db"),
		Clock: fakehost.NewClock(Start), Wake: &fakehost.Waker{}, IDs: &fakehost.IDs{Prefix: "id"},
		Cfg: core.NewConfig(),
	}
	tr.watchWaits()
	return tr
}

// Node is one booted instance on its own connection.
type Node struct {
	Inst   *core.Instance
	DB     *sqlitedb.DB
	Kill   *fakehost.KillDB
	Report recovery.Report
	tree   *Tree
}

// Host returns host parts for a new connection to the tree's file.
func (tr *Tree) Host() (core.Host, *sqlitedb.DB, *fakehost.KillDB) {
	db, err := sqlitedb.Open(tr.Path, tr.DB)
	require.NoError(tr.T, err)
	tr.T.Cleanup(func() { db.Close() })
	var inner storage.DB = db
	if tr.WrapDB != nil {
		inner = tr.WrapDB(inner)
	}
	kdb := fakehost.NewKillDB(inner)
	return core.Host{DB: kdb, Clock: tr.Clock, Wake: tr.Wake, IDs: tr.IDs}, db, kdb
}

// Boot opens a new instance on its own connection and sweeps (recovery.Boot).
func (tr *Tree) Boot(d core.Driver) *Node {
	tr.T.Helper()
	n, err := tr.BootSweepErr(d)
	require.NoError(tr.T, err)
	return n
}

// BootSweepErr is Boot for a boot whose sweep may fail (a read-only boot
// over a tree with claims): the instance serves anyway, and the sweep's
// error is returned beside it.
func (tr *Tree) BootSweepErr(d core.Driver) (*Node, error) {
	tr.T.Helper()
	host, db, kdb := tr.Host()
	inst, rep, err := recovery.Boot(context.Background(), host, tr.Cfg, d)
	require.NotNil(tr.T, inst, "boot failed: %v", err)
	tr.boots++
	n := &Node{Inst: inst, DB: db, Kill: kdb, Report: rep, tree: tr}
	tr.T.Cleanup(n.Crash)
	return n, err
}

// Crash kills the node as SIGKILL would: no shutdown record, no more writes.
func (n *Node) Crash() {
	n.Kill.Kill()
	n.Inst.Abandon()
}

// Idle waits (bounded by a generous real-time limit, only to fail instead of
// hanging) until no execution runs on the node.
func (n *Node) Idle() {
	n.tree.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(n.tree.T, n.Inst.WaitIdle(ctx), "executions still running")
}

// Read runs fn in a transaction on a fresh connection to the tree's file,
// independent of any instance (dead or alive).
func (tr *Tree) Read(fn func(tx storage.Tx) error) {
	tr.T.Helper()
	db, err := sqlitedb.Open(tr.Path, sqlitedb.Options{})
	require.NoError(tr.T, err)
	defer db.Close()
	require.NoError(tr.T, db.Tx(context.Background(), fn))
}

// Claim is a claims row as read back.
type Claim struct {
	Exists      bool
	ExecutionID string
	Attempts    int
	ClaimedAt   int64
}

// Claim reads a session's claim.
func (tr *Tree) Claim(sessionID string) Claim {
	var c Claim
	tr.Read(func(tx storage.Tx) error {
		var err error
		c.Exists, err = storage.QueryRow(tx, `SELECT COALESCE(execution_id, ''), resume_attempts, claimed_at FROM claims WHERE session_id = ?`,
			[]any{sessionID}, &c.ExecutionID, &c.Attempts, &c.ClaimedAt)
		return err
	})
	return c
}

// Events reads a session's whole log.
func (tr *Tree) Events(sessionID string) []event.Event {
	var evs []event.Event
	tr.Read(func(tx storage.Tx) error {
		var err error
		evs, err = core.ReadEvents(tx, sessionID, 0, 0)
		return err
	})
	return evs
}

// PromptState reads a prompt's state.
func (tr *Tree) PromptState(promptID string) string {
	var s string
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT state FROM prompts WHERE id = ?`, []any{promptID}, &s)
		return err
	})
	return s
}

// OfType filters events by type.
func OfType(evs []event.Event, typ event.Type) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Terminals returns the turn terminals of a log.
func Terminals(evs []event.Event) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.IsTerminal() {
			out = append(out, e)
		}
	}
	return out
}

// NewSession creates a root session on the node.
func (n *Node) NewSession(id string) string {
	n.tree.T.Helper()
	s, err := n.Inst.CreateSession(context.Background(), core.NewSession{ID: id, Principal: "tester"})
	require.NoError(n.tree.T, err)
	return s.ID
}

// Admit admits a queued prompt and returns its id.
func (n *Node) Admit(sessionID, text string) string {
	n.tree.T.Helper()
	a, err := n.Inst.Admit(context.Background(), sessionID, core.PromptInput{Text: text})
	require.NoError(n.tree.T, err)
	return a.PromptID
}

// PlanLine is one line of EXPLAIN QUERY PLAN: its node, its parent node
// (0: the top) and what it does.
type PlanLine struct {
	ID, Parent int64
	Detail     string
}

// QueryPlan is how SQLite would run query with args on the tree's
// database: the plan tests check that a query reads by an index, which a
// benchmark alone would not tell.
func (tr *Tree) QueryPlan(query string, args ...any) []PlanLine {
	tr.T.Helper()
	var plan []PlanLine
	tr.Read(func(tx storage.Tx) error {
		plan = plan[:0]
		rows, err := tx.Query(`EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var l PlanLine
			var unused int64
			if err := rows.Scan(&l.ID, &l.Parent, &unused, &l.Detail); err != nil {
				return err
			}
			plan = append(plan, l)
		}
		return nil
	})
	return plan
}
