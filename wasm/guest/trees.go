//go:build wasip1

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
)

// trees is api.Trees for the guest's one tree: the index of a directory
// of one tree, since the guest creates and deletes its tree itself
// (docs/abi.md §6), and the tree's running instance for the per-tree
// handler. The tree exists once its root session (id = the tree id) does;
// its principal is the root's. Behind the host's GuestHandler, the host's
// index has checked the owner already; the guest checks again.
type trees struct{ g *guest }

var _ api.Trees = trees{}

func (t trees) Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error) {
	inst := t.g.inst
	if rootID != t.g.cfg.TreeID {
		return nil, fmt.Errorf("create tree %s: this guest serves tree %s: %w", rootID, t.g.cfg.TreeID, api.ErrTreeExists)
	}
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
	t.g.watch(rootID)
	return inst, nil
}

func (t trees) Get(ctx context.Context, rootID string) (*core.Instance, api.TreeInfo, error) {
	if rootID != t.g.cfg.TreeID || t.g.deleted {
		return nil, api.TreeInfo{}, fmt.Errorf("get tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	s, err := t.g.inst.Session(ctx, rootID)
	if errors.Is(err, core.ErrNotFound) {
		return nil, api.TreeInfo{}, fmt.Errorf("get tree %s: %w", rootID, api.ErrTreeNotFound)
	}
	if err != nil {
		return nil, api.TreeInfo{}, err
	}
	return t.g.inst, api.TreeInfo{RootID: rootID, Principal: s.Principal, CreatedAt: s.CreatedAt}, nil
}

// Owner implements api.Trees: the guest's one tree is already running, so
// reading its root session boots nothing.
func (t trees) Owner(ctx context.Context, rootID string) (api.TreeInfo, error) {
	_, info, err := t.Get(ctx, rootID)
	return info, err
}

func (t trees) List(ctx context.Context, principal, cursor string, limit int) ([]api.TreeInfo, string, error) {
	if cursor != "" {
		return nil, "", nil
	}
	_, info, err := t.Get(ctx, t.g.cfg.TreeID)
	if errors.Is(err, api.ErrTreeNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if info.Principal != principal {
		return nil, "", nil
	}
	return []api.TreeInfo{info}, "", nil
}

// Delete stops the tree's executions and deletes every row of its
// database in one transaction; the wake-up is cleared. The guest serves
// nothing for the tree afterwards: the host drops the database file.
func (t trees) Delete(ctx context.Context, rootID string) error {
	if _, _, err := t.Get(ctx, rootID); err != nil {
		return err
	}
	inst := t.g.inst
	if err := inst.Close(ctx); err != nil {
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	t.g.deleted = true
	err := t.g.db.Tx(context.WithoutCancel(ctx), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('tree', 'schema_migrations') ORDER BY rowid DESC`)
		if err != nil {
			return err
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			names = append(names, n)
		}
		for _, n := range names {
			if _, err := tx.Exec(`DELETE FROM "` + n + `"`); err != nil {
				return fmt.Errorf("delete rows of %s: %w", n, err)
			}
		}
		return nil
	})
	hostWakeClear()
	if err != nil {
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	return nil
}
