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
	// Create provisions a new, empty tree for a root session id owned by
	// principal and returns its running instance. The handler then creates
	// the root session in it. An id already in use is ErrTreeExists.
	Create(ctx context.Context, rootID, principal string) (*core.Instance, error)
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
