//go:build wasip1

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
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
		Deleted:  gg.isDeleted,
		Created:  gg.created,
	}}
}

// created runs once the root session exists: its created_at goes on the
// create's 201 (createdWriter), and its live deltas to the emit import.
func (gg *guest) created(rootID string) {
	if s, err := gg.inst.Session(context.Background(), rootID); err == nil {
		gg.mu.Lock()
		gg.createdAt = s.CreatedAt
		gg.mu.Unlock()
	} else {
		gg.log.Warn("read the new tree's created_at", "err", err) // the host's clock stands in
	}
	gg.watch(rootID)
}

// createdWriter adds api.CreatedAtHeader to a create's 201, for the host,
// which records it in its index and removes it from the answer.
//
// It passes on no Abort (httpmsg.Aborter), nor Flush or Drain, and needs
// none: a create's answer is marshalled before its head (writeJSON), and
// after the head comes one body write of a few dozen bytes, which only
// buffers. Nothing of a create can fail once its head is out, so it never
// has an answer to cut short. A route that could would need them passed.
type createdWriter struct {
	httpmsg.ResponseWriter
	g *guest
}

func (w *createdWriter) WriteHeader(code int) {
	w.g.mu.Lock()
	at := w.g.createdAt
	w.g.mu.Unlock()
	if code == httpmsg.StatusCreated && at != 0 {
		w.Header().Set(api.CreatedAtHeader, strconv.FormatInt(at, 10))
	}
	w.ResponseWriter.WriteHeader(code)
}

// Delete stops the tree's executions and deletes every row of its
// database in one transaction; the wake-up is cleared. The guest serves
// nothing for the tree afterwards: the host drops the database file.
//
// A transaction that fails deletes nothing, and the tree stays as it was
// (docs/api.md), unless only its COMMIT was reported failed and the
// delete is stored all the same (deleteStored): that delete is done. One
// that deleted nothing is not marked deleted (a second DELETE deletes it,
// rather than answering 404 over the whole tree), and its turns, stopped
// with their claims by the close, keep a wake-up (DESIGN §4: no claim
// without one), whose handler boots the instance again (reopen) and
// resumes them. Until then the closed instance answers 503.
//
// A guest superseded by a newer boot over the same database deletes
// nothing: the delete's transaction is fenced by the epoch
// (core.Instance.CheckEpoch), as core's writes are, and is answered 503
// (core.ErrFenced); it arms no reopening, and reopens for no wake-up
// either, which would take the tree back from the instance that owns it.
func (t trees) Delete(ctx context.Context, rootID string) error {
	if _, err := t.Owner(ctx, rootID); err != nil {
		return err
	}
	gg := t.g
	gg.mu.Lock()
	gg.deleting = true
	gg.mu.Unlock()
	defer func() {
		gg.mu.Lock()
		gg.deleting = false
		gg.mu.Unlock()
	}()
	if err := gg.inst.Close(ctx); err != nil {
		gg.reopenLater()
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	// Every table's rows go but the schema's version and `tree`'s epoch
	// row, which fences an instance superseded before this delete (core
	// checks its epoch against it in every write): it stays as it was.
	// The delete is such a write too, fenced the same way in its own
	// transaction: a guest superseded by a newer boot (a zombie) must not
	// delete the tree under the instance that owns it.
	inst := gg.inst
	err := gg.db.Tx(context.WithoutCancel(ctx), func(tx storage.Tx) error {
		if err := inst.CheckEpoch(tx); err != nil {
			return err
		}
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
	if errors.Is(err, core.ErrFenced) {
		// Superseded: the tree, its turns and its wake-up are the newer
		// instance's, which serves them; this closed one neither deletes
		// nor reopens (that would take the tree back from it). 503: a
		// retry reaches the live instance.
		gg.log.Warn("delete refused: a newer instance owns the tree", "tree", rootID, "err", err)
		gg.mu.Lock()
		gg.superseded = true
		gg.mu.Unlock()
		return fmt.Errorf("delete tree %s: %w", rootID, err)
	}
	if err != nil {
		if stored, known := gg.deleteStored(ctx, rootID); !stored {
			// Unread (!known): the reopen reads the tree again, and
			// finishes the delete if it finds it gone.
			gg.mu.Lock()
			gg.deleteUnread = !known
			gg.mu.Unlock()
			gg.reopenLater()
			return fmt.Errorf("delete tree %s: %w", rootID, err)
		}
	}
	if err != nil {
		gg.log.Warn("the delete's commit was reported failed but is stored: the tree is deleted", "tree", rootID, "err", err)
	}
	gg.mu.Lock()
	gg.deleted = true
	gg.mu.Unlock()
	hostWakeClear()
	return nil
}

// deleteStored reports whether a delete whose transaction failed is stored
// all the same: a COMMIT reported failed may have been durable (a late I/O
// error, guestdb.DB). Answered 503 with the closed instance, such a tree
// would be gone while the client was told it stays, and every request
// until the wake-up's reopen would be refused 503 where 404 is the truth
// (the simulator's deleted-stays-gone, seed 3 with -delfault). Tx rolled
// back whatever its failure left open, so a new transaction reads what
// the disk holds: no root session row, the delete committed. A read that
// fails tells nothing (known false), and the tree is taken as still
// there; the reopen reads it again (reopen).
func (gg *guest) deleteStored(ctx context.Context, rootID string) (stored, known bool) {
	gone := false
	err := gg.db.Tx(context.WithoutCancel(ctx), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT 1 FROM sessions WHERE id = ?`, rootID)
		gone = err == nil && !rows.Next()
		return err
	})
	return err == nil && gone, err == nil
}
