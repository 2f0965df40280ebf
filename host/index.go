package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
)

// index.db is the host's own database: which trees exist, and which have a
// wake-up armed. It never holds anything of a tree's state. Its schema is
// versioned with PRAGMA user_version, forward-only: a version this code does
// not know is refused before any write.
const indexVersion = 3

// indexMigrations[v] brings the index from version v to v+1.
var indexMigrations = [][]string{
	{
		`CREATE TABLE trees (
		  id         TEXT    PRIMARY KEY,
		  principal  TEXT    NOT NULL,
		  created_at INTEGER NOT NULL
		) WITHOUT ROWID`,
		`CREATE INDEX trees_by_principal ON trees (principal, created_at DESC, id)`,
		// One row per tree whose wake-up is armed: at is when it fires (ms).
		`CREATE TABLE wakeups (
		  tree_id TEXT    PRIMARY KEY,
		  at      INTEGER NOT NULL
		) WITHOUT ROWID`,
	},
	{
		// A tree is visible (Get, List) only once ready: its root session
		// exists. Rows left not ready by a crash are removed at Open.
		`ALTER TABLE trees ADD COLUMN ready INTEGER NOT NULL DEFAULT 1`,
	},
	{
		// A create's Idempotency-Key (api.CreateKey), per principal: the
		// tree it created and the digest of its body. Written in the same
		// commit as the tree's row; removed with the row of a create that
		// failed or died (index.deleteTree's unmade), kept when a tree is
		// deleted (the key stays spent). Never expired.
		`CREATE TABLE create_keys (
		  principal TEXT NOT NULL,
		  key       TEXT NOT NULL,
		  tree_id   TEXT NOT NULL,
		  digest    TEXT NOT NULL,
		  PRIMARY KEY (principal, key)
		) WITHOUT ROWID`,
		`CREATE INDEX create_keys_by_tree ON create_keys (tree_id)`,
	},
}

type index struct{ db *sqlitedb.DB }

// openIndex opens the index and brings its schema to indexVersion. An index
// already at that version is only read, so a full disk does not stop the
// server from starting and serving reads (docs/RATIONALE.md, "Why does a
// full disk make the tree read-only rather than failing the boot?"); only
// an index that must be created or migrated needs storage to take a write.
func openIndex(ctx context.Context, path string, vfs string) (*index, error) {
	db, err := sqlitedb.Open(path, sqlitedb.Options{VFS: vfs})
	if err != nil {
		return nil, fmt.Errorf("open index: %w", refused(err))
	}
	var v int64
	err = db.Tx(ctx, func(tx storage.Tx) error {
		var err error
		v, err = indexSchema(tx)
		return err
	})
	if err == nil && v < indexVersion {
		err = db.Tx(ctx, func(tx storage.Tx) error {
			// Read again inside the write: another process may have
			// migrated it meanwhile.
			v, err := indexSchema(tx)
			if err != nil {
				return err
			}
			for ; v < indexVersion; v++ {
				for _, q := range indexMigrations[v] {
					if _, err := tx.Exec(q); err != nil {
						return err
					}
				}
			}
			_, err = tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, indexVersion))
			return err
		})
		err = refused(err)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open index: %w", err)
	}
	return &index{db: db}, nil
}

// refused says what a transient failure to create or migrate the index
// means: with no index at its version the host cannot serve even reads.
// A locked database most likely means another server runs on the same
// data directory; a full one, a full disk.
func refused(err error) error {
	if err == nil || !storage.IsTransient(err) {
		return err
	}
	why := storage.Describe(err)
	if storage.CodeOf(err).Primary() == storage.CodeBusy {
		why += ": is another server using this data directory?"
	}
	return fmt.Errorf("storage refused the write that creates or migrates it (%s): %w", why, err)
}

// indexSchema reads the index's schema version and refuses one newer than
// this build's.
func indexSchema(tx storage.Tx) (int64, error) {
	var v int64
	if _, err := storage.QueryRow(tx, `PRAGMA user_version`, nil, &v); err != nil {
		return 0, err
	}
	if v > indexVersion {
		return 0, fmt.Errorf("index schema version %d is newer than this build's %d", v, indexVersion)
	}
	return v, nil
}

func (ix *index) close() error { return ix.db.Close() }

// errKeyTaken: insertTree's create key names another tree already (a
// create with the same key committed first); nothing was written.
var errKeyTaken = errors.New("the create's key names another tree")

// insertTree adds a tree's row, not ready, and, with a key, the key's row
// in the same commit; false if the id is taken, errKeyTaken if the key
// is (then neither row is written).
func (ix *index) insertTree(ctx context.Context, info api.TreeInfo, key *api.CreateKey) (bool, error) {
	var n int64
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.Exec(`INSERT INTO trees (id, principal, created_at, ready) VALUES (?, ?, ?, 0) ON CONFLICT (id) DO NOTHING`,
			info.RootID, info.Principal, info.CreatedAt)
		if err != nil || n == 0 || key == nil {
			return err
		}
		k, err := tx.Exec(`INSERT INTO create_keys (principal, key, tree_id, digest) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			info.Principal, key.Key, info.RootID, key.Digest)
		if err == nil && k == 0 {
			err = errKeyTaken // rolls the tree's row back
		}
		return err
	})
	return n == 1, err
}

// keyRecord is what the index knows of a principal's create key.
type keyRecord struct {
	treeID string
	digest string
	// state of the key's tree: keyTreeReady, keyTreeCreating (its row not
	// ready: a create under way) or keyTreeDeleted (no row).
	state int
}

const (
	keyTreeDeleted = iota
	keyTreeCreating
	keyTreeReady
)

// createKey looks up a principal's create key.
func (ix *index) createKey(ctx context.Context, principal, key string) (keyRecord, bool, error) {
	var rec keyRecord
	var found bool
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		var ready int64
		var err error
		found, err = storage.QueryRow(tx, `SELECT k.tree_id, k.digest, COALESCE(t.ready, -1) FROM create_keys k
			LEFT JOIN trees t ON t.id = k.tree_id WHERE k.principal = ? AND k.key = ?`,
			[]any{principal, key}, &rec.treeID, &rec.digest, &ready)
		switch ready {
		case 1:
			rec.state = keyTreeReady
		case 0:
			rec.state = keyTreeCreating
		default:
			rec.state = keyTreeDeleted
		}
		return err
	})
	return rec, found, err
}

func (ix *index) tree(ctx context.Context, id string) (api.TreeInfo, bool, error) {
	info := api.TreeInfo{RootID: id}
	var found bool
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		var err error
		found, err = storage.QueryRow(tx, `SELECT principal, created_at FROM trees WHERE id = ? AND ready = 1`, []any{id}, &info.Principal, &info.CreatedAt)
		return err
	})
	return info, found, err
}

// known reports whether the index has a row for the tree, ready or not.
func (ix *index) known(ctx context.Context, id string) (bool, error) {
	var found bool
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT EXISTS (SELECT 1 FROM trees WHERE id = ?)`, []any{id}, &found)
		return err
	})
	return found, err
}

// deleteTree removes the tree's rows (its wake-up too); false if there was
// no tree row. unmade says the tree's create is being undone (it failed,
// or died): its client never got the id, so its create key is removed
// too and free again, even if the row was made ready (a commit reported
// failed that was stored). A tree deleted otherwise keeps its key,
// spent (KeySpent), unless its row never became ready.
func (ix *index) deleteTree(ctx context.Context, id string, unmade bool) (bool, error) {
	var n int64
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		keys := `DELETE FROM create_keys WHERE tree_id = ?1 AND EXISTS (SELECT 1 FROM trees WHERE id = ?1 AND ready = 0)`
		if unmade {
			keys = `DELETE FROM create_keys WHERE tree_id = ?1`
		}
		if _, err := tx.Exec(keys, id); err != nil {
			return err
		}
		var err error
		if n, err = tx.Exec(`DELETE FROM trees WHERE id = ?`, id); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM wakeups WHERE tree_id = ?`, id)
		return err
	})
	return n == 1, err
}

// markReady makes a created tree visible once its root session exists,
// with the root's created_at when known (nonzero), so the list says what
// the session says.
func (ix *index) markReady(ctx context.Context, id string, createdAt int64) error {
	return ix.db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`UPDATE trees SET ready = 1, created_at = CASE WHEN ? > 0 THEN ? ELSE created_at END WHERE id = ?`, createdAt, createdAt, id)
		return err
	})
}

// unfinishedTree is an index row never made ready: its create died between
// the row and the root session.
type unfinishedTree struct {
	id, principal string
}

// unready lists trees whose creation never finished (a crash between the
// index row and the root session), with their principals so that Open can
// say whose create it discards.
func (ix *index) unready(ctx context.Context) ([]unfinishedTree, error) {
	var trees []unfinishedTree
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT id, principal FROM trees WHERE ready = 0`)
		if err != nil {
			return err
		}
		trees = trees[:0]
		for rows.Next() {
			var t unfinishedTree
			if err := rows.Scan(&t.id, &t.principal); err != nil {
				return err
			}
			trees = append(trees, t)
		}
		return nil
	})
	return trees, err
}

// list is one page of a principal's trees, newest first, after the cursor.
func (ix *index) list(ctx context.Context, principal string, after *api.ListCursor, limit int) ([]api.TreeInfo, bool, error) {
	var out []api.TreeInfo
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		var rows *storage.Rows
		var err error
		if after == nil {
			rows, err = tx.Query(`SELECT id, principal, created_at FROM trees WHERE principal = ? AND ready = 1
				ORDER BY created_at DESC, id LIMIT ?`, principal, limit+1)
		} else {
			rows, err = tx.Query(`SELECT id, principal, created_at FROM trees WHERE principal = ? AND ready = 1
				AND (created_at < ? OR (created_at = ? AND id > ?))
				ORDER BY created_at DESC, id LIMIT ?`, principal, after.CreatedAt, after.CreatedAt, after.ID, limit+1)
		}
		if err != nil {
			return err
		}
		out = make([]api.TreeInfo, 0, rows.Len())
		for rows.Next() {
			var t api.TreeInfo
			if err := rows.Scan(&t.RootID, &t.Principal, &t.CreatedAt); err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// setWakeup stores the tree's wake-up time, replacing any.
func (ix *index) setWakeup(ctx context.Context, id string, at int64) error {
	return ix.db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO wakeups (tree_id, at) VALUES (?, ?) ON CONFLICT (tree_id) DO UPDATE SET at = excluded.at`, id, at)
		return err
	})
}

func (ix *index) deleteWakeup(ctx context.Context, id string) error {
	return ix.db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`DELETE FROM wakeups WHERE tree_id = ?`, id)
		return err
	})
}

type wakeupRow struct {
	treeID string
	at     int64
}

func (ix *index) wakeups(ctx context.Context) ([]wakeupRow, error) {
	var out []wakeupRow
	err := ix.db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT tree_id, at FROM wakeups ORDER BY at, tree_id`)
		if err != nil {
			return err
		}
		out = make([]wakeupRow, 0, rows.Len())
		for rows.Next() {
			var r wakeupRow
			if err := rows.Scan(&r.treeID, &r.at); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}
