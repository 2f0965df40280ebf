//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
)

// index is the api.Index of the object's one tree, for the directory
// routes the object serves for the front Worker (create the root session,
// delete the tree). The front keeps the principal's session directory;
// this only answers for the tree this object holds. The tree exists once
// its root session (id = the tree id) does; its principal is the root's.
type index struct{ o *Object }

var _ api.Index = index{}

func (t index) Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error) {
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

// Owner reads the root session's principal; the object's one tree is
// already running, so this boots nothing.
func (t index) Owner(ctx context.Context, rootID string) (api.TreeInfo, error) {
	if rootID != t.o.treeID || t.o.isDeleted() {
		return api.TreeInfo{}, fmt.Errorf("tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	s, err := t.o.inst.Session(ctx, rootID)
	if errors.Is(err, core.ErrNotFound) {
		return api.TreeInfo{}, fmt.Errorf("tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	if err != nil {
		return api.TreeInfo{}, err
	}
	return api.TreeInfo{RootID: rootID, Principal: s.Principal, CreatedAt: s.CreatedAt}, nil
}

// List answers for this object only (the front lists from the principal's
// session directory, across objects).
func (t index) List(ctx context.Context, principal, cursor string, _ int) ([]api.TreeInfo, string, error) {
	if cursor != "" {
		return nil, "", nil
	}
	info, err := t.Owner(ctx, t.o.treeID)
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
func (t index) Delete(ctx context.Context, rootID string) error {
	if _, err := t.Owner(ctx, rootID); err != nil {
		return err
	}
	if err := t.o.inst.Close(ctx); err != nil {
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	t.o.mu.Lock()
	t.o.deleted = true
	t.o.mu.Unlock()
	t.o.tree.Close() // end the tree's event streams
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

// treeIDs is the directory's id source: POST /v1/sessions creates the
// object's one tree, whose id the front Worker chose.
type treeIDs struct{ id string }

func (t treeIDs) NewID() string { return t.id }

// Headers the front Worker sets on every request it forwards to the
// object (and removes from the client's): the tree the object serves and
// the principal the front authenticated. Only the front reaches the
// object, so the object trusts them.
const (
	TreeHeader      = "x-revenant-tree"
	PrincipalHeader = "x-revenant-principal"
)

// frontPrincipal is the directory's api.Authenticator: the principal the
// front named. A request without one is 401 (it did not come through the
// front).
type frontPrincipal struct{}

func (frontPrincipal) Authenticate(r *http.Request, _ bool) (string, error) {
	if p := r.Header.Get(PrincipalHeader); p != "" {
		return p, nil
	}
	return "", &api.Error{Type: api.ErrUnauthorized, Message: "no principal: the object serves only the front Worker"}
}
