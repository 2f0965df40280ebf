package api

import (
	"context"
	"errors"

	"github.com/revenantrt/revenant/core"
)

// Index is what the directory (Directory) needs from a host: the trees it
// knows, by root session id, and who owns each. Only Create boots a tree
// (the new one); Owner, List and Delete never do. The local server's
// host/ keeps an index of many trees; a Durable Object host's front
// Worker would keep its own.
type Index interface {
	// Create provisions a new tree for a root session id owned by principal,
	// runs init on its instance (the directory creates the root session
	// there) and only then makes the tree visible to Owner and List. If
	// init fails, or the process dies before the tree became visible, the
	// tree never appears. An id already in use is ErrTreeExists.
	Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error)
	// Owner returns the tree's index entry without booting the tree or
	// touching its instance: the API checks ownership with it before any
	// tree is booted, so another principal's request never boots one (a
	// new epoch and a sweep that resumes turns). An unknown tree is
	// ErrTreeNotFound.
	Owner(ctx context.Context, rootID string) (TreeInfo, error)
	// List returns the principal's trees, newest first, starting after the
	// cursor returned by the previous page ("" for the first), at most limit.
	// next is "" on the last page.
	List(ctx context.Context, principal, cursor string, limit int) (trees []TreeInfo, next string, err error)
	// Delete stops the tree's instance, if it runs, and deletes the tree
	// for good.
	Delete(ctx context.Context, rootID string) error
}

// Booter boots trees: what the composed Handler needs, besides an Index,
// to give the per-tree handler (TreeHandler) a running instance.
type Booter interface {
	// Get returns the running instance of the tree rootID, booting it
	// (migrations and sweep) if it is not running. An unknown tree is
	// ErrTreeNotFound.
	Get(ctx context.Context, rootID string) (*core.Instance, TreeInfo, error)
}

// Trees is a host whose trees run in this process: an Index that also
// boots them. New composes the directory and the per-tree handler over it.
type Trees interface {
	Index
	Booter
}

// TreeInfo is a host's index entry for a tree.
type TreeInfo struct {
	RootID    string
	Principal string
	CreatedAt int64 // ms
}

// Tree is one tree as the per-tree handler (TreeHandler) sees it: already
// authorized for the request's principal, and running. It knows nothing
// of other trees.
type Tree struct {
	RootID    string
	Principal string         // the caller, who owns the tree
	Instance  *core.Instance // running when given
	// Next returns the tree's running instance once Instance has stopped
	// (idle eviction): the host boots the tree again. An event stream
	// follows the tree with it. nil: the tree has no next instance, and a
	// stream ends when Instance stops.
	Next func(ctx context.Context) (*core.Instance, error)
}

// Errors an Index or Booter returns.
var (
	ErrTreeNotFound = errors.New("tree not found")
	ErrTreeExists   = errors.New("tree already exists")
)
