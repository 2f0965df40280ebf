package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/sqlitedb"
)

var ctx = context.Background()

// driver is a scripted stand-in for the turn runner, shared by every tree of
// a host. A turn does what its prompt says:
//
//	hold      wait until cancelled (then stop without a record) or Release
//	die once  stop without a record on its first run (as if the instance
//	          died), answer on the next
//	park once park on one question (questionID) on its first run, answer
//	          on the next
//	anything  answer at once
//
// Every Run is announced on started before it does anything.
type driver struct {
	started chan *core.Execution

	mu      sync.Mutex
	release chan struct{}
	runs    map[string]int // by prompt id
}

func newDriver() *driver {
	return &driver{started: make(chan *core.Execution, 256), release: make(chan struct{}), runs: map[string]int{}}
}

func (d *driver) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.release:
	default:
		close(d.release)
	}
}

func (d *driver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.mu.Lock()
	d.runs[x.PromptID()]++
	n, release := d.runs[x.PromptID()], d.release
	d.mu.Unlock()
	d.started <- x
	switch x.Prompt() {
	case "hold":
		select {
		case <-release:
		case <-ctx.Done():
			return core.Outcome{Kind: core.Stopped}
		}
	case "die once":
		if n == 1 {
			return core.Outcome{Kind: core.Stopped}
		}
	case "park once":
		if n == 1 {
			return core.Outcome{Kind: core.Parked, Park: &event.Parked{
				StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(),
				Blockers: []event.Blocker{{ID: questionID(x.PromptID()), Kind: event.KindQuestion, CallID: x.ID() + ".call",
					Adapter: "question@1", Request: json.RawMessage(`{"questions":[{"question":"which?"}]}`)}},
			}}
		}
	}
	return treetest.Answer(ctx, x)
}

// questionID is the id of the question a "park once" turn parks on.
func questionID(promptID string) string { return "q-" + promptID }

// next waits (bounded in real time, only to fail instead of hanging) for the
// next execution to start.
func (d *driver) next(t *testing.T) *core.Execution {
	t.Helper()
	select {
	case x := <-d.started:
		return x
	case <-time.After(30 * time.Second):
		t.Fatal("no execution started")
		return nil
	}
}

// env is one data directory with the fake host parts every host opened on
// it shares.
type env struct {
	t     *testing.T
	dir   string
	clock *fakehost.Clock
	ids   *fakehost.IDs
	d     *driver
	core  core.Config

	mu        sync.Mutex
	booted    []string        // tree ids whose files were opened, in order
	delivered chan delivery   // settled wake-up deliveries
	bootGate  func(id string) // optional: runs inside the boot hook
}

type delivery struct {
	id  string
	err error
}

func newEnv(t *testing.T) *env {
	return &env{
		t: t, dir: t.TempDir(), clock: fakehost.NewClock(treetest.Start), ids: &fakehost.IDs{Prefix: "id"},
		d: newDriver(), core: core.NewConfig(), delivered: make(chan delivery, 256),
	}
}

func (e *env) config() host.Config {
	cfg := host.Config{DataDir: e.dir, Core: e.core, Driver: e.d, IdleTimeout: time.Minute,
		ManualEviction: true, Clock: e.clock, IDs: e.ids}
	return host.WithHooks(cfg, func(id string) {
		e.mu.Lock()
		e.booted = append(e.booted, id)
		gate := e.bootGate
		e.mu.Unlock()
		if gate != nil {
			gate(id)
		}
	}, func(id string, err error) { e.delivered <- delivery{id, err} })
}

// open opens a host on the directory and waits until Open's boots have run.
func (e *env) open(cfg host.Config) *host.Host {
	e.t.Helper()
	e.mu.Lock()
	e.booted = nil
	e.mu.Unlock()
	return openRecovered(e.t, cfg)
}

// openRecovered opens a host, closed when the test ends, and waits until
// Open's boots have run: what a test reopening a directory reads is then
// what those boots recovered.
func openRecovered(t *testing.T, cfg host.Config) *host.Host {
	t.Helper()
	h, err := host.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(ctx) })
	select {
	case <-h.Recovered():
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("Open's boots did not finish")
	}
	return h
}

func (e *env) setGate(f func(id string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bootGate = f
}

func (e *env) bootedIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.booted...)
}

// nextDelivery waits for the next settled wake-up delivery.
func (e *env) nextDelivery() delivery {
	e.t.Helper()
	select {
	case d := <-e.delivered:
		return d
	case <-time.After(30 * time.Second):
		e.t.Fatal("no wake-up delivered")
		return delivery{}
	}
}

// tree creates a tree with its root session (as the API handler does).
func (e *env) tree(h *host.Host, id string) *core.Instance {
	e.t.Helper()
	inst, err := h.Create(ctx, id, "alice", nil)
	require.NoError(e.t, err)
	_, err = inst.CreateSession(ctx, core.NewSession{ID: id, Principal: "alice"})
	require.NoError(e.t, err)
	return inst
}

func admit(t *testing.T, inst *core.Instance, sessionID, text string) string {
	t.Helper()
	a, err := inst.Admit(ctx, sessionID, core.PromptInput{Text: text})
	require.NoError(t, err)
	return a.PromptID
}

func idle(t *testing.T, inst *core.Instance) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, inst.WaitIdle(c))
}

// faultVFS registers, for the test's life, a fault-injecting SQLite VFS
// named name on the env's clock (host.WithVFS opens databases through it).
func (e *env) faultVFS(t *testing.T, name string) *faultvfs.Fault {
	t.Helper()
	fault := faultvfs.New(e.clock.Now)
	faultvfs.Register(name, fault)
	t.Cleanup(func() { faultvfs.Unregister(name) })
	return fault
}

func (e *env) treePath(id string) string { return filepath.Join(e.dir, "trees", id+".db") }

// read runs fn on a fresh connection to a database file of the directory.
func read(t *testing.T, path string, fn func(tx storage.Tx) error) {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Tx(ctx, fn))
}

// execIndex runs stmts in one transaction on a fresh connection to the
// host's index: rows a test writes as a kill or a failed cleanup would
// have left them.
func (e *env) execIndex(stmts ...string) {
	e.t.Helper()
	read(e.t, filepath.Join(e.dir, "index.db"), func(tx storage.Tx) error {
		for _, q := range stmts {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *env) promptState(treeID, promptID string) string {
	e.t.Helper()
	var s string
	read(e.t, e.treePath(treeID), func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT state FROM prompts WHERE id = ?`, []any{promptID}, &s)
		return err
	})
	return s
}

func (e *env) claimed(treeID, sessionID string) bool {
	e.t.Helper()
	var found bool
	read(e.t, e.treePath(treeID), func(tx storage.Tx) error {
		var err error
		found, err = storage.QueryRow(tx, `SELECT 1 FROM claims WHERE session_id = ?`, []any{sessionID}, new(int64))
		return err
	})
	return found
}

// wakeups reads index.wakeups.
func (e *env) wakeups() map[string]int64 {
	e.t.Helper()
	out := map[string]int64{}
	read(e.t, filepath.Join(e.dir, "index.db"), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT tree_id, at FROM wakeups`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var at int64
			if err := rows.Scan(&id, &at); err != nil {
				return err
			}
			out[id] = at
		}
		return nil
	})
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// offlineRunnerHost opens a host on dir that runs the real turn runner
// with the offline model and tools, and creates a tree with a root session
// of alice's. It returns the host's config (to reopen dir with), the host,
// which the test closes, the tree and its id.
func offlineRunnerHost(t *testing.T, dir string, tools ...tool.Tool) (host.Config, *host.Host, *core.Instance, string) {
	t.Helper()
	reg, err := tool.NewRegistry(tools...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(host.RealClock{}, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	cfg := host.Config{DataDir: dir, Core: core.NewConfig(), Driver: r}
	h, err := host.Open(ctx, cfg)
	require.NoError(t, err)
	id := host.RandomIDs{}.NewID()
	inst, err := h.Create(ctx, id, "alice", nil)
	require.NoError(t, err)
	_, err = inst.CreateSession(ctx, core.NewSession{ID: id, Principal: "alice"})
	require.NoError(t, err)
	return cfg, h, inst, id
}
