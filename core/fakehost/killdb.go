package fakehost

import (
	"context"
	"errors"
	"sync"

	"github.com/revenantrt/revenant/core/storage"
)

// ErrKilled is what every transaction of a killed KillDB returns: the
// process is gone, nothing more reaches the database.
var ErrKilled = errors.New("fakehost: instance killed")

// KillDB wraps a storage.DB, counts committed transactions, and can die just
// before or just after a chosen commit, the way a SIGKILL would. After it
// dies every transaction fails with ErrKilled without touching the database.
type KillDB struct {
	inner storage.DB

	mu      sync.Mutex
	commits int
	killAt  int  // 1-based commit number to die at; 0: never
	after   bool // die after that commit is durable instead of before
	dead    bool
	died    chan struct{}
}

// NewKillDB wraps inner.
func NewKillDB(inner storage.DB) *KillDB {
	return &KillDB{inner: inner, died: make(chan struct{})}
}

// KillAt arms the kill: at commit n (1-based, counted from now on), die
// before it is attempted or after it is durable.
func (k *KillDB) KillAt(n int, after bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killAt, k.after = k.commits+n, after
}

// Kill dies now.
func (k *KillDB) Kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dieLocked()
}

func (k *KillDB) dieLocked() {
	if !k.dead {
		k.dead = true
		close(k.died)
	}
}

// Died is closed when the database dies.
func (k *KillDB) Died() <-chan struct{} { return k.died }

// Commits is the number of writing transactions committed through this
// wrapper.
func (k *KillDB) Commits() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.commits
}

// Tx implements storage.DB. Only transactions that write count as commits:
// a kill "before commit n" fails the first write of the n-th writing
// transaction, so nothing of it is stored; a kill "after" lets it commit.
func (k *KillDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return ErrKilled
	}
	n := k.commits + 1
	kt := &killTx{killBefore: n == k.killAt && !k.after}
	err := k.inner.Tx(ctx, func(tx storage.Tx) error {
		kt.Tx = tx
		return fn(kt)
	})
	if kt.killBefore && kt.wrote {
		k.dieLocked()
		return ErrKilled
	}
	if err != nil || !kt.wrote {
		return err
	}
	k.commits = n
	if n == k.killAt && k.after {
		k.dieLocked()
		return ErrKilled
	}
	return nil
}

// killTx notices writes; the one chosen to die before refuses them.
type killTx struct {
	storage.Tx
	killBefore bool
	wrote      bool
}

func (t *killTx) Exec(query string, args ...any) (int64, error) {
	t.wrote = true
	if t.killBefore {
		return 0, ErrKilled
	}
	return t.Tx.Exec(query, args...)
}
