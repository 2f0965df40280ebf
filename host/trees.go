package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
)

// MaxTreeIDLen is the longest tree id accepted.
const MaxTreeIDLen = 64

// DefaultListLimit is the page size List uses when asked for none.
const DefaultListLimit = 50

// ErrInvalidTreeID is returned by Create for an id that is not 1–64 ASCII
// letters, digits, '-' or '_'. It is a core.ErrInvalid (a client mistake).
var ErrInvalidTreeID error = &core.Error{Code: core.ErrInvalid, Msg: fmt.Sprintf("tree id must be 1-%d letters, digits, '-' or '_'", MaxTreeIDLen)}

// ValidTreeID reports whether id may name a tree. Tree ids become file
// names, so nothing else ever reaches the file system.
func ValidTreeID(id string) bool {
	if len(id) == 0 || len(id) > MaxTreeIDLen {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// Create implements api.Trees: it adds the tree's index row (not ready),
// creates its database file, boots an instance on it, runs init (nil: none)
// and then marks the row ready, making the tree visible. A failed init
// removes the tree, as does a panic in the boot or init (which then panics
// on); a crash before the row is ready leaves a row that the next Open
// removes. An id that names a tree is api.ErrTreeExists; one that another
// operation holds (a Create, a Get or a Delete of it) is waited for first,
// until ctx ends.
func (h *Host) Create(ctx context.Context, rootID, principal string, init func(*core.Instance) error) (*core.Instance, error) {
	if h.cfg.Guest != nil {
		return nil, errGuestTrees
	}
	e, err := h.createTree(ctx, rootID, principal, nil, nativeInit(ctx, rootID, init))
	if err != nil {
		return nil, err
	}
	return e.inst, nil
}

// The local server keeps its principals' create keys (docs/api.md's
// Idempotency-Key): api.Directory only honours a key on a KeyedIndex, so
// losing the method would drop every key silently. This keeps it.
var _ api.KeyedIndex = (*Host)(nil)

// CreateKeyed implements api.KeyedIndex: Create under a principal's
// create key (createKeyed).
func (h *Host) CreateKeyed(ctx context.Context, rootID, principal string, key api.CreateKey, init func(*core.Instance) error) (string, error) {
	if h.cfg.Guest != nil {
		return "", errGuestTrees
	}
	id, _, err := h.createKeyed(ctx, rootID, principal, key, nativeInit(ctx, rootID, init))
	return id, err
}

// nativeInit is Create's init on an in-process tree's entry: it runs init
// on the instance, then names the root session's created_at.
func nativeInit(ctx context.Context, rootID string, init func(*core.Instance) error) func(e *entry) (int64, error) {
	return func(e *entry) (int64, error) {
		if init == nil {
			return 0, nil
		}
		if err := init(e.inst); err != nil {
			return 0, err
		}
		// The list says what the root's snapshot says (markReady).
		s, err := e.inst.Session(ctx, rootID)
		if err != nil {
			return 0, nil // no root session (an init that made none): the index's own time stands
		}
		return s.CreatedAt, nil
	}
}

// createKeyed creates tree rootID as createTree does, recording key in
// the commit of its index row, unless key names a tree already: then it
// creates nothing and answers for that tree (api.KeyedIndex.CreateKeyed)
// with its id and replayed true. A create under way with the same key
// (its row not ready yet, or ready but its entry still held: an undo may
// follow) is waited for, until ctx ends: its outcome decides, and a failed
// one frees the key for this create.
func (h *Host) createKeyed(ctx context.Context, rootID, principal string, key api.CreateKey, init func(*entry) (int64, error)) (id string, replayed bool, err error) {
	released := false // the last read found the key's create under way and its entry gone
	for {
		rec, found, err := h.index.createKey(ctx, principal, key.Key)
		if err != nil {
			return "", false, fmt.Errorf("create tree %s: read its key: %w", rootID, err)
		}
		if !found {
			_, err := h.createTree(ctx, rootID, principal, &key, init)
			if errors.Is(err, errKeyTaken) {
				continue // a create with the same key committed first: answer for its tree
			}
			return rootID, false, err
		}
		if rec.digest != key.Digest {
			return "", false, api.KeyReused(key.Key)
		}
		if rec.state == keyTreeDeleted {
			return "", false, api.KeySpent(key.Key, rec.treeID)
		}
		h.mu.Lock()
		var busy chan struct{}
		if cur := h.trees[rec.treeID]; cur != nil {
			busy = cur.busy
		}
		h.mu.Unlock()
		switch {
		case rec.state == keyTreeReady && busy == nil:
			return rec.treeID, true, nil
		case rec.state == keyTreeReady:
			// Ready, but an operation holds its entry: it may be the
			// create itself, undoing a row whose ready commit was reported
			// failed though stored (a late I/O error), and answering its id
			// now would hand out a tree about to be deleted (and, once the
			// undo freed the key, a second tree for it). Its outcome
			// decides: wait, then read again.
		case busy == nil:
			// Its create is under way: it holds the tree's entry until its
			// row is ready or gone (createTree). An entry already released
			// means that happened since the read: read again. Released at
			// two reads in a row, the row is a create's that ended without
			// undoing it (its cleanup failed too): nothing will finish it
			// before the next start removes it, and reading on would spin.
			if released {
				return "", false, errKeyUnfinished
			}
			released = true
			continue
		}
		released = false
		if f := h.cfg.hooks.createWaits; f != nil {
			f(rec.treeID)
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return "", false, fmt.Errorf("create tree %s: %w", rootID, ctx.Err())
		}
	}
}

// errKeyUnfinished answers a create whose key names a tree an earlier
// create left unfinished and could not undo (createKeyed): the server's
// next start removes that tree and frees the key.
var errKeyUnfinished = &api.Error{
	Type:    api.ErrUnavailable,
	Message: "an earlier create with this Idempotency-Key did not finish and could not be undone; the server frees the key when it next starts",
}

// createTree is Create for any backend: init runs on the new tree's entry
// while it is still invisible, and returns the root session's created_at
// (0: unknown), which the index then records in place of its own clock's,
// so the list and the session agree.
func (h *Host) createTree(ctx context.Context, rootID, principal string, key *api.CreateKey, init func(*entry) (int64, error)) (*entry, error) {
	if !ValidTreeID(rootID) {
		return nil, fmt.Errorf("create tree %q: %w", rootID, ErrInvalidTreeID)
	}
	var e *entry
	for e == nil {
		h.mu.Lock()
		if h.closed.Load() {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		if cur := h.trees[rootID]; cur != nil {
			busy := cur.busy
			h.mu.Unlock()
			if busy == nil {
				return nil, fmt.Errorf("create tree %s: %w", rootID, api.ErrTreeExists)
			}
			// Another operation holds the id: a create, whose outcome
			// decides; a boot, of a tree or of an id that names none (a
			// Get); a close; or a delete, of a tree or of nothing. Only
			// its end says whether a tree exists: wait for it and look
			// again, rather than answer "exists" for an id that a Get or a
			// Delete of nothing holds.
			if f := h.cfg.hooks.createWaits; f != nil {
				f(rootID)
			}
			select {
			case <-busy:
			case <-ctx.Done():
				return nil, fmt.Errorf("create tree %s: %w", rootID, ctx.Err())
			}
			continue
		}
		if h.full() {
			h.mu.Unlock()
			if err := h.makeRoom(); err != nil {
				return nil, fmt.Errorf("create tree %s: %w", rootID, err)
			}
			continue
		}
		e = &entry{id: rootID, busy: make(chan struct{})}
		h.trees[rootID] = e
		h.mu.Unlock()
	}

	defer h.failBootOnPanic(e, false)
	err := h.create(context.WithoutCancel(ctx), e, principal, key, init)
	// A Get that waited on a failed Create looks again: the failure (an id
	// taken by a tree not running here, say) is not its answer.
	h.finishBoot(e, err, false, true)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (h *Host) create(ctx context.Context, e *entry, principal string, key *api.CreateKey, init func(*entry) (int64, error)) error {
	info := api.TreeInfo{RootID: e.id, Principal: principal, CreatedAt: h.cfg.Clock.Now()}
	ok, err := h.index.insertTree(ctx, info, key)
	if errors.Is(err, errKeyTaken) {
		return err
	}
	if err != nil {
		err = fmt.Errorf("create tree %s: %w", e.id, err)
		if ok {
			// The rows were written, and a commit reported failed may be
			// stored all the same (a late I/O error): undone as any failed
			// create's, or the row, never ready, would hold its create key
			// until the next Open (createKeyed's errKeyUnfinished).
			err = errors.Join(err, h.dropRow(ctx, e.id))
		}
		return err
	}
	if !ok {
		return fmt.Errorf("create tree %s: %w", e.id, api.ErrTreeExists)
	}
	defer h.undoCreateOnPanic(ctx, e)
	// The id had no row, so any file under its name is left over from a
	// Delete that died between removing the row and the file.
	if err := h.removeFiles(e.id); err != nil {
		return errors.Join(fmt.Errorf("create tree %s: %w", e.id, err), h.dropRow(ctx, e.id))
	}
	if _, err := h.boot(ctx, e, &info); err != nil {
		return errors.Join(err, h.undoCreate(ctx, e))
	}
	var createdAt int64
	if init != nil {
		if createdAt, err = init(e); err != nil {
			return errors.Join(err, h.undoCreate(ctx, e))
		}
	}
	if createdAt != 0 {
		e.info.CreatedAt = createdAt
	}
	if err := h.index.markReady(ctx, e.id, createdAt); err != nil {
		return errors.Join(fmt.Errorf("create tree %s: %w", e.id, err), h.undoCreate(ctx, e))
	}
	return nil
}

// undoCreate undoes a create past its index row: the instance closed once
// booted (e.run), the row dropped, the files removed, so the id is free.
func (h *Host) undoCreate(ctx context.Context, e *entry) error {
	var closeErr error
	if e.run != nil {
		closeErr = h.closeEntry(ctx, e)
	}
	return errors.Join(closeErr, h.dropRow(ctx, e.id), h.removeFiles(e.id))
}

// undoCreateOnPanic, deferred by create once the tree's row is written,
// undoes the create when what follows panics (SQLite's connection panics
// when its memory cannot be mapped; an init may panic), as a failed create
// is undone, then panics on (to failBootOnPanic, which drops the entry).
// Left, the row, never ready, would keep the id taken until the next Open
// (a create of it ErrTreeExists, a Get ErrTreeNotFound), and an instance
// the boot had started would run on, its database open, for a tree no
// entry holds.
func (h *Host) undoCreateOnPanic(ctx context.Context, e *entry) {
	p := recover()
	if p == nil {
		return
	}
	if err := h.undoCreate(ctx, e); err != nil {
		h.log.Warn("undo a panicked create", "tree", e.id, "err", err)
	}
	panic(p)
}

// dropRow removes the index rows of a tree whose create is undone (or
// died), its create key with them: the client never got the id.
func (h *Host) dropRow(ctx context.Context, id string) error {
	if _, err := h.index.deleteTree(ctx, id, true); err != nil {
		return fmt.Errorf("undo tree %s: %w", id, err)
	}
	return nil
}

// Get implements api.Trees. An id that is not a valid tree id, or has no
// index row, is api.ErrTreeNotFound; no file is created for it. The tree
// counts as in use until ctx is done (core/api passes the request's
// context: a request in flight, an event stream), and eviction, idle or
// for the cap on open trees, leaves a tree in use open. A context that is
// never done (context.Background) holds nothing. A tree that is not open
// while the host is at Config.MaxOpenTrees is ErrTooManyOpen when no open
// tree may be closed to make room.
func (h *Host) Get(ctx context.Context, rootID string) (*core.Instance, api.TreeInfo, error) {
	if h.cfg.Guest != nil {
		return nil, api.TreeInfo{}, errGuestTrees
	}
	if !ValidTreeID(rootID) {
		return nil, api.TreeInfo{}, fmt.Errorf("get tree %q: %w", rootID, api.ErrTreeNotFound)
	}
	for {
		e, _, err := h.activate(ctx, rootID, true)
		if err != nil {
			return nil, api.TreeInfo{}, err
		}
		if ctx.Done() == nil {
			return e.inst, e.info, nil // a context that never ends holds nothing
		}
		if f := h.cfg.hooks.found; f != nil {
			f(rootID)
		}
		if !h.hold(e) {
			continue // evicted or deleted since: look again
		}
		context.AfterFunc(ctx, func() { h.release(e) })
		return e.inst, e.info, nil
	}
}

// Owner implements api.Trees from the index alone: it never boots the
// tree, so the API can refuse another principal's request before anything
// runs. It serves hosts of both kinds (in process and guests).
func (h *Host) Owner(ctx context.Context, rootID string) (api.TreeInfo, error) {
	info, found, err := h.treeInfo(ctx, rootID)
	if err != nil {
		return api.TreeInfo{}, fmt.Errorf("owner of tree %q: %w", rootID, err)
	}
	if !found {
		return api.TreeInfo{}, fmt.Errorf("owner of tree %q: %w", rootID, api.ErrTreeNotFound)
	}
	return info, nil
}

// List implements api.Trees. The cursor is opaque; one this host did not
// return is an error wrapping core.ErrInvalid. limit <= 0 means
// DefaultListLimit.
func (h *Host) List(ctx context.Context, principal, cursor string, limit int) ([]api.TreeInfo, string, error) {
	var after *api.ListCursor
	if cursor != "" {
		c, ok := api.ParseListCursor(cursor, ValidTreeID)
		if !ok {
			return nil, "", &core.Error{Code: core.ErrInvalid, Msg: fmt.Sprintf("cursor %q is not one this server returned", core.Clip(cursor))}
		}
		after = &c
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if h.closed.Load() {
		return nil, "", ErrClosed
	}
	trees, more, err := h.index.list(ctx, principal, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list trees: %w", err)
	}
	next := ""
	if more {
		last := trees[len(trees)-1]
		next = api.ListCursor{CreatedAt: last.CreatedAt, ID: last.RootID}.Encode()
	}
	return trees, next, nil
}

// Delete implements api.Trees: it closes the tree's instance, removes its
// index rows (its wake-up's with them), forgets the wake-up's timer, then
// removes its files (database, -wal, -shm). An unknown tree is
// api.ErrTreeNotFound; an index that could not be written deletes nothing
// (delete).
func (h *Host) Delete(ctx context.Context, rootID string) error {
	if !ValidTreeID(rootID) {
		return fmt.Errorf("delete tree %q: %w", rootID, api.ErrTreeNotFound)
	}
	var e *entry
	unopened := false
	for e == nil {
		h.mu.Lock()
		if h.closed.Load() {
			h.mu.Unlock()
			return ErrClosed
		}
		cur := h.trees[rootID]
		switch {
		case cur == nil:
			// A tree that is not open: the entry only keeps others out
			// while it goes, and takes no room under the cap.
			e = &entry{id: rootID, busy: make(chan struct{})}
			h.trees[rootID] = e
			h.unopened++
			unopened = true
		case cur.busy == nil:
			e = cur
			e.busy = make(chan struct{})
		}
		h.mu.Unlock()
		if cur != nil && e == nil {
			select {
			case <-cur.busy:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	kept, err := h.delete(ctx, e)
	h.mu.Lock()
	delete(h.trees, rootID)
	if unopened {
		h.unopened--
	}
	if !kept {
		delete(h.wakers, rootID)
	}
	close(e.busy)
	e.busy = nil
	h.mu.Unlock()
	return err
}

// delete does Delete's work on e, whose busy the caller holds. A failed
// write of the index deletes nothing, unless it is stored all the same
// (deleteStored: then the delete is done): the tree stays (kept), and
// so does its wake-up, row and timer, for the executions the close
// stopped with their claims (DESIGN §4: no claim without a wake-up). Its
// timer, if it fires meanwhile, waits for the delete to end and then boots
// the tree, or finds it gone.
func (h *Host) delete(ctx context.Context, e *entry) (kept bool, err error) {
	var errs []error
	if e.run != nil {
		// Errors here are the instance's own (executions slow to stop); the
		// tree is going away regardless.
		if err := h.closeEntry(ctx, e); err != nil {
			h.log.Warn("delete tree: close instance", "tree", e.id, "err", err)
		}
	}
	found, err := h.deleteIndex(context.WithoutCancel(ctx), e.id)
	if err != nil && !h.deleteStored(context.WithoutCancel(ctx), e.id) {
		return true, fmt.Errorf("delete tree %s: %w", e.id, err)
	}
	if err != nil {
		h.log.Warn("delete tree: the index's commit was reported failed but is stored: the tree is deleted", "tree", e.id, "err", err)
		// Whether it removed a row is unknown: it did, for the API's
		// callers, whose owner check found the row. (Deletes of one tree
		// are serialised by the entry's busy: a second one waits for this
		// one, then finds no row and is answered 404.)
		found = true
	}
	h.mu.Lock()
	w := h.wakers[e.id]
	h.mu.Unlock()
	if w != nil {
		w.retire()
	}
	if err := h.removeFiles(e.id); err != nil {
		errs = append(errs, fmt.Errorf("delete tree %s: %w", e.id, err))
	}
	if !found && len(errs) == 0 {
		return false, fmt.Errorf("delete tree %s: %w", e.id, api.ErrTreeNotFound)
	}
	return false, errors.Join(errs...)
}

// deleteStored reports whether a removal of the tree's index rows that
// failed is stored all the same: a COMMIT reported failed may have been
// durable (a late I/O error). Answered 503 as a delete that deleted
// nothing, such a tree would be gone for the API (404 everywhere, and not
// listed) while its client was told it stays, and its files and wake-up
// timer would stay until the next Open (removeDeletedFiles). A fresh read
// that finds no row says the delete committed; a read that fails tells
// nothing, and the tree is taken as still there, as wasm/guest's
// deleteStored does for the guest's own delete.
func (h *Host) deleteStored(ctx context.Context, id string) bool {
	known, err := h.index.known(ctx, id)
	return err == nil && !known
}

// deleteIndex removes the tree's index rows (index.deleteTree); a test can
// make it fail.
func (h *Host) deleteIndex(ctx context.Context, id string) (bool, error) {
	if f := h.cfg.hooks.deleteIndex; f != nil {
		if err := f(id); err != nil {
			return false, err
		}
	}
	return h.index.deleteTree(ctx, id, false)
}

// removeFiles removes the tree's database and its WAL and shared-memory
// files; missing ones are fine.
// treeFileSuffixes are what a tree's id is followed by in the names of
// its files: the database and SQLite's companions.
var treeFileSuffixes = []string{".db", ".db-wal", ".db-shm", ".db-journal"}

// removeDeletedFiles removes, at Open, the files of trees the index has no
// row for. A create writes its row before any file, so these are left by
// a Delete that died between committing the row's removal and removing
// the files: the tree is gone for the API (a second Delete answers 404
// before it reaches the files), and nothing else would ever remove them.
// Names that are no tree's are left alone.
func (h *Host) removeDeletedFiles(ctx context.Context) {
	entries, err := os.ReadDir(h.treesDir)
	if err != nil {
		h.log.Warn("list tree files", "err", err)
		return
	}
	ids := map[string]bool{}
	for _, de := range entries {
		for _, suffix := range treeFileSuffixes {
			if id, ok := strings.CutSuffix(de.Name(), suffix); ok && ValidTreeID(id) {
				ids[id] = true
				break
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		known, err := h.index.known(ctx, id)
		if err != nil {
			h.log.Warn("look up a tree file's tree", "tree", id, "err", err)
			return
		}
		if known {
			continue
		}
		if err := h.removeFiles(id); err != nil {
			h.log.Warn("remove the files of a deleted tree", "tree", id, "err", err)
			continue
		}
		h.log.Info("removed the files a cut delete left", "tree", id)
	}
}

func (h *Host) removeFiles(id string) error {
	var errs []error
	for _, suffix := range treeFileSuffixes {
		f := filepath.Join(h.treesDir, id+suffix)
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
