//go:build wasip1

package main

import (
	"context"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
)

// trees is api.Trees for the guest's one tree: the index of a directory
// of one tree (api.OneTree), since the guest creates and deletes its tree
// itself (docs/abi.md §6), and the tree's running instance for the
// per-tree handler. Behind the host's GuestHandler, the host's index has
// checked the owner already; the guest checks again.
type trees struct {
	api.OneTree
	g *guest
}

var _ api.Trees = trees{}

func newTrees(gg *guest) trees {
	return trees{g: gg, OneTree: api.OneTree{
		ID:       gg.cfg.TreeID,
		Instance: func() *core.Instance { return gg.inst },
		Deleted:  func() bool { return gg.deleted },
		Created:  gg.watch,
	}}
}

// Delete stops the tree's executions and deletes every row of its
// database in one transaction; the wake-up is cleared. The guest serves
// nothing for the tree afterwards: the host drops the database file.
func (t trees) Delete(ctx context.Context, rootID string) error {
	if _, err := t.Owner(ctx, rootID); err != nil {
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
