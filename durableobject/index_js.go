//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/retry"
)

// index is the api.Index of the object's one tree (api.OneTree), for
// the directory routes the object serves for the front Worker (create the
// root session, delete the tree). The front keeps the principal's session
// directory; this only answers for the tree this object holds.
type index struct {
	api.OneTree
	o *Object
}

var _ api.Index = index{}

func (o *Object) index() index {
	return index{o: o, OneTree: api.OneTree{
		ID:       o.treeID,
		Instance: func() *core.Instance { return o.inst },
		Deleted:  o.isDeleted,
		Created:  o.created,
	}}
}

// Delete stops the tree's executions, deletes the object's whole storage
// (ctx.storage.deleteAll: every table and the stored tree id) and its
// alarm. The object then serves nothing for the tree.
//
// A deleteAll that fails leaves the tree in storage, its turns stopped
// but still claimed, while this object has closed its instance: the
// alarm is set again (no claim without a wake-up, DESIGN §4) and the
// object gives itself up, so the next event (that alarm, or the client's
// retry, told 503) gets a fresh object that boots the tree as it is.
func (t index) Delete(ctx context.Context, rootID string) error {
	if _, err := t.Owner(ctx, rootID); err != nil {
		return err
	}
	return t.o.deleteTree(ctx)
}

// deleteTree is Delete once the tree is known to be the caller's (or no
// one's: unmade).
//
// It waits for the tree's executions to stop as long as an interrupt
// waits for one, and at least 5 s (closeWait: the interrupt grace, at
// least minCloseWait, for one that heeds its cancellation needs a
// moment). One that ignores its cancellation (a tool, a bug) may still
// write, so the storage must not be deleted under it: a write after the
// deleteAll would leave a tree half there, or make one again. Nothing in
// Go can stop it, but the object's abort can (the isolate's executions
// go with the object). So a delete whose executions did not stop in time
// deletes nothing, gives the object up, and is answered 503: its client
// deletes again (the front keeps the tree's directory row for it), and
// the fresh object that the next event gets deletes the tree. The
// executions the close stopped kept their claims and the alarm (the
// delete has not cleared it yet), so until then the tree's turns resume
// there as after a crash. ctx bounds the wait too, but the front's
// delete never ends it early: api.Directory detaches a delete from its
// request (a client gone mid-delete must not leave it half done), and the
// other caller (unmade) deletes a tree that runs no turns.
func (o *Object) deleteTree(ctx context.Context) error {
	closing, cancel := context.WithTimeout(ctx, o.closeWait)
	err := o.inst.Close(closing)
	cancel()
	if err != nil {
		o.log.Warn("delete tree: its turns did not stop; giving the object up, and nothing is deleted", "waited", o.closeWait, "err", err)
		o.giveUp("the tree's turns did not stop for its delete")
		return fmt.Errorf("delete tree %s: %w: %w", o.treeID, errTurnsDidNotStop, err)
	}
	o.mu.Lock()
	o.deleted = true
	o.mu.Unlock()
	o.tree.Close() // end the tree's event streams
	if err := o.forgetStorage(); err != nil {
		o.alarm.restore(o.clock.Now() + retry.Wake().Delay(0).Milliseconds())
		o.giveUp("the tree's storage could not be deleted")
		return fmt.Errorf("delete tree %s: delete storage: %w: %w", o.treeID, core.ErrStorageUnavailable, err)
	}
	return nil
}

// errTurnsDidNotStop answers a delete whose tree's executions did not
// stop in time (deleteTree): nothing was deleted, and deleting again is
// served by a fresh object.
var errTurnsDidNotStop = &api.Error{Type: api.ErrUnavailable, RetryAfter: time.Second,
	Message: "the session's turns did not stop in time for the delete; nothing was deleted; its host restarts: delete again"}

// unmade deletes the storage of a tree whose root session was never
// created, when a delete of its root reaches it: a create cut short
// after the object stored the tree (its answer lost, the object reset
// before the create's commit). No directory row records such a tree and
// no principal owns it; the front deletes it when a create's fetch
// failed (worker/entry.mjs). The delete itself is then answered as for
// any tree not there (404). A tree with a root session, whoever owns it,
// is left to the delete's owner check.
//
// A deleteTree that fails leaves the tree stored: that delete is answered
// here, as any failed delete is (503), never as a tree not there (the
// front's clean-up reads 404 as gone). It reports whether it answered.
func (o *Object) unmade(ctx context.Context, w httpmsg.ResponseWriter, r *httpmsg.Request) bool {
	if r.Method != httpmsg.MethodDelete || r.URL.Path != "/v1/sessions/"+o.treeID || o.isDeleted() {
		return false
	}
	if _, err := o.index().Owner(ctx, o.treeID); !errors.Is(err, api.ErrTreeNotFound) {
		return false
	}
	o.log.Warn("deleting a tree whose root session was never created")
	if err := o.deleteTree(ctx); err != nil {
		o.log.Error("delete a tree with no root session", "err", err)
		api.WriteError(w, err)
		return true
	}
	return false
}

// forgetStorage clears the alarm for good and deletes the storage. A
// storage call that throws (as on an object whose storage broke) instead
// of rejecting fails the delete like a rejection: recovered as a panic by
// the route's handler, it would leave the object marked deleted with the
// tree and its alarm still stored, and the client's retry told 404, read
// by the front as deleted (204).
func (o *Object) forgetStorage() (err error) {
	defer recoverJS(&err)
	o.alarm.clear()
	return o.deleteStorage()
}

// How a test build's route or a test makes the next deleteAll fail
// (Object.failNextDelete): its promise rejects, the call throws, or Go
// panics.
const (
	failDeleteReject int32 = 1 + iota
	failDeleteThrow
	failDeletePanic // a Go panic: a bug's, which no storage error explains
)

// deleteStorage deletes the object's whole storage; a test build can make
// it fail once (testroutes_js.go).
func (o *Object) deleteStorage() error {
	switch o.failNextDelete.Swap(0) {
	case failDeleteReject:
		return errors.New("revenant test route: deleteAll failed")
	case failDeleteThrow:
		js.Global().Get("JSON").Call("parse", "revenant test route: deleteAll threw") // a SyntaxError thrown into Go
	case failDeletePanic:
		panic("revenant test: deleteAll panicked")
	}
	var deleted js.Value
	o.db.outside(func() { deleted = o.bridge.Get("storage").Call("deleteAll") }) // never part of a transaction that rolls back
	_, err := await(deleted)
	return err
}

func (o *Object) isDeleted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deleted
}

// Headers the front Worker sets on every request it forwards to the
// object (and removes from the client's): the tree the object serves and
// the principal the front authenticated. Only the front reaches the
// object, so the object trusts them.
const (
	TreeHeader      = "x-revenant-tree"
	PrincipalHeader = "x-revenant-principal"
)

// CreatedAtHeader is on the object's 201 to a create, for the front only
// (which removes it): api.CreatedAtHeader, which the front records in the
// principal's directory.
const CreatedAtHeader = api.CreatedAtHeader

// created keeps the new root session's created_at for the create's
// answer (createdWriter); the API's Index calls it once the session
// exists, before the 201 is written.
func (o *Object) created(rootID string) {
	s, err := o.inst.Session(context.Background(), rootID)
	if err != nil {
		o.log.Warn("read the new tree's created_at", "err", err) // the front's clock stands in
		return
	}
	o.mu.Lock()
	o.createdAt = s.CreatedAt
	o.mu.Unlock()
}

// createdWriter adds CreatedAtHeader to a create's 201.
type createdWriter struct {
	httpmsg.ResponseWriter
	o *Object
}

func (w createdWriter) WriteHeader(code int) {
	w.o.mu.Lock()
	at := w.o.createdAt
	w.o.mu.Unlock()
	if code == httpmsg.StatusCreated && at != 0 {
		w.Header().Set(CreatedAtHeader, strconv.FormatInt(testCreatedAt(at), 10))
	}
	if code == httpmsg.StatusCreated {
		testLoseCreate(w.o, "after")
	}
	w.ResponseWriter.WriteHeader(code)
}

// frontPrincipal is the directory's api.Authenticator: the principal the
// front named. A request without one is 401 (it did not come through the
// front).
type frontPrincipal struct{}

func (frontPrincipal) Authenticate(r *httpmsg.Request, _ bool) (string, error) {
	if p := r.Header.Get(PrincipalHeader); p != "" {
		// The front percent-encodes it (worker/entry.mjs): a principal may
		// be any text, a header value only bytes.
		if principal, err := url.PathUnescape(p); err == nil && principal != "" {
			return principal, nil
		}
		return "", &api.Error{Type: api.ErrUnauthorized, Message: "malformed principal: the object serves only the front Worker"}
	}
	return "", &api.Error{Type: api.ErrUnauthorized, Message: "no principal: the object serves only the front Worker"}
}
