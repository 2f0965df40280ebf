package api_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// memTrees is a Trees over treetest trees in one process: enough for the
// handler's tests. host/ is the real implementation.
type memTrees struct {
	t      testing.TB
	driver core.Driver
	mu     sync.Mutex
	trees  map[string]*memTree
	n      int
	fail   error          // returned by Get when set
	gets   map[string]int // Get calls by tree: each would boot a tree not running
	// prepare, when set, is called with each new tree before its instance
	// boots (to fail its storage on demand, say).
	prepare func(*treetest.Tree)
}

type memTree struct {
	info api.TreeInfo
	tree *treetest.Tree
	node *treetest.Node
}

func newMemTrees(t testing.TB, d core.Driver) *memTrees {
	return &memTrees{t: t, driver: d, trees: map[string]*memTree{}, gets: map[string]int{}}
}

func (m *memTrees) Create(_ context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.trees[rootID]; ok {
		return nil, api.ErrTreeExists
	}
	m.n++
	tr := treetest.New(m.t)
	if m.prepare != nil {
		m.prepare(tr)
	}
	mt := &memTree{info: api.TreeInfo{RootID: rootID, Principal: principal, CreatedAt: int64(m.n)}, tree: tr, node: tr.Boot(m.driver)}
	if err := init(mt.node.Inst); err != nil {
		mt.node.Crash()
		return nil, err
	}
	m.trees[rootID] = mt
	return mt.node.Inst, nil
}

func (m *memTrees) Get(_ context.Context, rootID string) (*core.Instance, api.TreeInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, api.TreeInfo{}, m.fail
	}
	m.gets[rootID]++
	mt, ok := m.trees[rootID]
	if !ok {
		return nil, api.TreeInfo{}, fmt.Errorf("tree %q: %w", rootID, api.ErrTreeNotFound)
	}
	return mt.node.Inst, mt.info, nil
}

func (m *memTrees) Owner(_ context.Context, rootID string) (api.TreeInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return api.TreeInfo{}, m.fail
	}
	mt, ok := m.trees[rootID]
	if !ok {
		return api.TreeInfo{}, fmt.Errorf("tree %q: %w", rootID, api.ErrTreeNotFound)
	}
	return mt.info, nil
}

// getCalls is how many times Get was asked for the tree.
func (m *memTrees) getCalls(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets[id]
}

func (m *memTrees) List(_ context.Context, principal, cursor string, limit int) ([]api.TreeInfo, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []api.TreeInfo
	for _, mt := range m.trees {
		if mt.info.Principal == principal {
			all = append(all, mt.info)
		}
	}
	sort.Slice(all, func(i, j int) bool { // newest first, as host.List: by id among trees of one instant
		if all[i].CreatedAt != all[j].CreatedAt {
			return all[i].CreatedAt > all[j].CreatedAt
		}
		return all[i].RootID > all[j].RootID
	})
	start := 0
	if cursor != "" {
		fmt.Sscan(cursor, &start)
	}
	if start > len(all) {
		start = len(all)
	}
	end := min(start+limit, len(all))
	next := ""
	if end < len(all) {
		next = fmt.Sprint(end)
	}
	return all[start:end], next, nil
}

func (m *memTrees) Delete(_ context.Context, rootID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.trees[rootID]
	if !ok {
		return api.ErrTreeNotFound
	}
	mt.node.Crash()
	delete(m.trees, rootID)
	return nil
}

func (m *memTrees) tree(id string) *memTree {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trees[id]
}

// reboot crashes the tree's instance and boots the next one (a restart).
func (m *memTrees) reboot(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt := m.trees[id]
	mt.node.Crash()
	mt.node = mt.tree.Boot(m.driver)
}

// rebootFull crashes the tree's instance and boots the next one while its
// storage refuses every write: the instance starts read-only.
func (m *memTrees) rebootFull(id string) *faultvfs.Fault {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt := m.trees[id]
	fault := mt.tree.Faults()
	mt.node.Crash()
	fault.FailFor(time.Hour, faultvfs.Full)
	mt.node = mt.tree.Boot(m.driver)
	return fault
}
