package api

import (
	"context"
	"errors"

	"github.com/revenantrt/revenant/core"
)

// Trees is what the handler needs from a host: one running instance per
// tree, found by its root session id. The local server's host/ keeps many
// trees, one SQLite file each; a Durable Object is one tree.
type Trees interface {
	// Create provisions a new tree for a root session id owned by principal,
	// runs init on its instance (the handler creates the root session there)
	// and only then makes the tree visible to Get and List. If init fails,
	// or the process dies before the tree became visible, the tree never
	// appears. An id already in use is ErrTreeExists.
	Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error)
	// Owner returns the tree's index entry without booting the tree or
	// touching its instance: the handler checks ownership with it before
	// Get, so another principal's request never boots a tree (a new epoch
	// and a sweep that resumes turns). An unknown tree is ErrTreeNotFound.
	Owner(ctx context.Context, rootID string) (TreeInfo, error)
	// Get returns the running instance of the tree rootID, booting it
	// (migrations and sweep) if it is not running. An unknown tree is
	// ErrTreeNotFound.
	Get(ctx context.Context, rootID string) (*core.Instance, TreeInfo, error)
	// List returns the principal's trees, newest first, starting after the
	// cursor returned by the previous page ("" for the first), at most limit.
	// next is "" on the last page.
	List(ctx context.Context, principal, cursor string, limit int) (trees []TreeInfo, next string, err error)
	// Delete stops the tree's instance and deletes the tree for good.
	Delete(ctx context.Context, rootID string) error
}

// TreeInfo is a host's index entry for a tree.
type TreeInfo struct {
	RootID    string
	Principal string
	CreatedAt int64 // ms
}

// Errors a Trees implementation returns.
var (
	ErrTreeNotFound = errors.New("tree not found")
	ErrTreeExists   = errors.New("tree already exists")
)
