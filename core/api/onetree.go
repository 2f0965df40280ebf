package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
)

// OneTree is the Index (and Booter) of a host that holds exactly one tree,
// already running: a wasm guest, a Durable Object. The tree exists once
// its root session (id = the tree id, which the host was given) does; its
// principal is the root's. Reading it boots nothing. Deleting is the
// host's own business: a host embeds OneTree and adds Delete.
//
// OneTree is also the directory's id source (IDs): POST /v1/sessions
// creates the host's one tree, whose id was chosen before the host
// started (by the local host's index, or by the front Worker).
type OneTree struct {
	ID string
	// Instance returns the tree's running instance.
	Instance func() *core.Instance
	// Deleted, if set, reports that the host deleted the tree: it then
	// serves nothing for it.
	Deleted func() bool
	// Created, if set, runs after the root session was created (the guest
	// starts watching the session's events for emit).
	Created func(rootID string)
}

// CreatedAtHeader is on a one-tree host's 201 to a create, for the host in
// front of it only (the local host of a wasm guest, the front Worker of a
// Durable Object), which removes it: the root session's created_at, which
// that host records in its index so the session list says what the
// session's snapshot says. The API's 201 body carries only the id.
const CreatedAtHeader = "X-Revenant-Created-At"

// NewID implements IDSource: the one tree's id.
func (t OneTree) NewID() string { return t.ID }

func (t OneTree) gone(rootID string) bool {
	return rootID != t.ID || (t.Deleted != nil && t.Deleted())
}

// Create implements Index: it runs init (which creates the root session)
// on the running instance, once.
func (t OneTree) Create(ctx context.Context, rootID, _ string, init func(*core.Instance) error) (*core.Instance, error) {
	if t.gone(rootID) {
		return nil, fmt.Errorf("create tree %s: this host serves tree %s: %w", rootID, t.ID, ErrTreeExists)
	}
	inst := t.Instance()
	if _, err := inst.Session(ctx, rootID); err == nil {
		return nil, fmt.Errorf("create tree %s: %w", rootID, ErrTreeExists)
	} else if !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	if init != nil {
		if err := init(inst); err != nil {
			return nil, err
		}
	}
	if t.Created != nil {
		t.Created(rootID)
	}
	return inst, nil
}

// Get implements Booter: the tree is already running.
func (t OneTree) Get(ctx context.Context, rootID string) (*core.Instance, TreeInfo, error) {
	info, err := t.Owner(ctx, rootID)
	if err != nil {
		return nil, TreeInfo{}, err
	}
	return t.Instance(), info, nil
}

// Owner implements Index from the root session.
func (t OneTree) Owner(ctx context.Context, rootID string) (TreeInfo, error) {
	if t.gone(rootID) {
		return TreeInfo{}, fmt.Errorf("tree %s: %w", rootID, ErrTreeNotFound)
	}
	s, err := t.Instance().Session(ctx, rootID)
	if errors.Is(err, core.ErrNotFound) {
		return TreeInfo{}, fmt.Errorf("tree %s: %w", rootID, ErrTreeNotFound)
	}
	if err != nil {
		return TreeInfo{}, err
	}
	return TreeInfo{RootID: rootID, Principal: s.Principal, CreatedAt: s.CreatedAt}, nil
}

// List implements Index: the one tree, if principal owns it.
func (t OneTree) List(ctx context.Context, principal, cursor string, _ int) ([]TreeInfo, string, error) {
	if cursor != "" {
		return nil, "", nil
	}
	info, err := t.Owner(ctx, t.ID)
	if errors.Is(err, ErrTreeNotFound) {
		return nil, "", nil
	}
	if err != nil || info.Principal != principal {
		return nil, "", err
	}
	return []TreeInfo{info}, "", nil
}
