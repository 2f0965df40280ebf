//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
)

// trees is api.Trees for the object's one tree. The tree exists once its
// root session (id = the tree id) does; its principal is the root's.
// (Issue 12's per-tree handler replaces this adapter.)
type trees struct{ o *Object }

var _ api.Trees = trees{}

func (t trees) Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error) {
	if rootID != t.o.treeID || t.o.isDeleted() {
		return nil, fmt.Errorf("create tree %s: this object serves tree %s: %w", rootID, t.o.treeID, api.ErrTreeExists)
	}
	inst := t.o.inst
	if _, err := inst.Session(ctx, rootID); err == nil {
		return nil, fmt.Errorf("create tree %s: %w", rootID, api.ErrTreeExists)
	} else if !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	if init != nil {
		if err := init(inst); err != nil {
			return nil, err
		}
	}
	return inst, nil
}

func (t trees) Get(ctx context.Context, rootID string) (*core.Instance, api.TreeInfo, error) {
	if rootID != t.o.treeID || t.o.isDeleted() {
		return nil, api.TreeInfo{}, fmt.Errorf("get tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	s, err := t.o.inst.Session(ctx, rootID)
	if errors.Is(err, core.ErrNotFound) {
		return nil, api.TreeInfo{}, fmt.Errorf("get tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	if err != nil {
		return nil, api.TreeInfo{}, err
	}
	return t.o.inst, api.TreeInfo{RootID: rootID, Principal: s.Principal, CreatedAt: s.CreatedAt}, nil
}

// Owner reads the root session's principal; the object's one tree is
// already booted, so this boots nothing.
func (t trees) Owner(ctx context.Context, rootID string) (api.TreeInfo, error) {
	_, info, err := t.Get(ctx, rootID)
	return info, err
}

// List answers for this object only; the session directory (issue 12)
// lists a principal's trees across objects.
func (t trees) List(ctx context.Context, principal, cursor string, _ int) ([]api.TreeInfo, string, error) {
	if cursor != "" {
		return nil, "", nil
	}
	_, info, err := t.Get(ctx, t.o.treeID)
	if errors.Is(err, api.ErrTreeNotFound) {
		return nil, "", nil
	}
	if err != nil || info.Principal != principal {
		return nil, "", err
	}
	return []api.TreeInfo{info}, "", nil
}

// Delete stops the tree's executions, deletes the object's whole storage
// (ctx.storage.deleteAll: every table and the stored tree id) and its
// alarm. The object then serves nothing for the tree.
func (t trees) Delete(ctx context.Context, rootID string) error {
	if _, _, err := t.Get(ctx, rootID); err != nil {
		return err
	}
	if err := t.o.inst.Close(ctx); err != nil {
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	t.o.mu.Lock()
	t.o.deleted = true
	t.o.mu.Unlock()
	t.o.alarm.clear()
	if _, err := await(t.o.bridge.Get("storage").Call("deleteAll")); err != nil {
		return fmt.Errorf("delete tree %s: delete storage: %w", rootID, err)
	}
	return nil
}

func (o *Object) isDeleted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deleted
}

// treeIDs is the API handler's id source: POST /v1/sessions creates the
// object's one tree, whose id the front Worker chose.
type treeIDs struct{ id string }

func (t treeIDs) NewID() string { return t.id }
