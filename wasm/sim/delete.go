package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// deleter is the client of a tree chosen for deletion (Config.Deletes): it
// sends DELETE /v1/sessions/{root} at a moment of the tree's life, and
// again after a kill or a 5xx, until it is answered 204 (or 404, once an
// earlier attempt's delete committed). The host side watches the guest's
// commits for the delete's: just before it commits, the simulator copies
// the committed database (before), which package check judges by every
// other rule (check.DeletedTree); once it committed, what the tree does is
// recorded in the ledger (check.Deletion) for the rules of a deleted tree.
//
// The simulator, as the tree's host, keeps the database file after the
// delete (a host drops it): so the checker sees whether the delete left
// rows, and every later request and boot meets the emptied database, as
// after a host that died between the guest's answer and the file's
// removal.
type deleter struct {
	rng     *rand.Rand
	trigger string
	// armed: the client waits for its moment (a listing that shows a
	// pending question or permission request, or quiescence).
	armed bool
	// sent is set once the first DELETE went out; watching once one
	// reached a guest (its commits are watched for the delete's).
	sent, watching bool
	committed      bool
	done           bool // answered 204 or 404: the client is done
	// prePos is the commit position just before the delete committed;
	// commitPos answers it from then on (the emptied log restarts its
	// positions, which must not be confused with the judged log's).
	prePos int64
	before string // the copy of the database just before the delete's commit
	copied bool
	// plan is the kill aimed at a DELETE's commit (aimAtDelete); drop is
	// set when the host stops the deleted tree's guest once it answered
	// (dropDeleted), dropped once it did.
	plan          *plan
	aimAfter      bool
	drop, dropped bool
}

// Delete triggers: when the client deletes its tree.
const (
	trigTurn     = "during a turn"
	trigPending  = "while a question or permission request is pending"
	trigChildren = "while sub-agents run"
	trigQuiet    = "once the tree went quiet"
)

// deletesFor is tree i's deleter, or nil if its client never deletes it.
// Drawn like budgetFor, on a generator of its own, which the deleter
// keeps: at share 0 nothing is drawn and no history changes.
func (c Config) deletesFor(i int) *deleter {
	if c.Deletes == 0 {
		return nil
	}
	rng := stream(c.Seed, keyDeletes, i)
	if rng.Float64() >= c.Deletes {
		return nil
	}
	return &deleter{rng: rng}
}

// planDelete picks the moment of the tree's delete: a moment after one of
// its prompts arrived (its turn or the queue runs), once a listing shows
// a question or permission request pending, a moment after a prompt that
// starts sub-agents (while they run), or when the tree first goes quiet.
func (t *tree) planDelete() {
	d := t.del
	d.before = strings.TrimSuffix(t.path, ".db") + ".before.db"
	var prompts, tasks []int64
	for _, a := range t.actions {
		if a.kind == actPrompt {
			prompts = append(prompts, a.at)
			if a.tasks {
				tasks = append(tasks, a.at)
			}
		}
	}
	r := d.rng.IntN(20)
	switch {
	case r >= 7 && r < 13:
		d.trigger, d.armed = trigPending, true
		return
	case r >= 13 && r < 18 && len(tasks) > 0:
		d.trigger = trigChildren
		t.addAction(action{at: tasks[d.rng.IntN(len(tasks))] + 300 + int64(d.rng.IntN(5_000)), kind: actDelete})
		return
	case r >= 18:
		d.trigger, d.armed = trigQuiet, true
		return
	}
	d.trigger = trigTurn
	t.addAction(action{at: prompts[d.rng.IntN(len(prompts))] + int64(d.rng.IntN(6_000)), kind: actDelete})
}

// deleteOnListing is the client whose moment is a pending question: a
// listing answered 200 that shows one sends the DELETE a moment later.
func (t *tree) deleteOnListing(pending int) {
	if d := t.del; d != nil && d.armed && d.trigger == trigPending && pending > 0 {
		d.armed = false
		t.addAction(action{at: t.now + int64(d.rng.IntN(2_000)), kind: actDelete})
	}
}

// deleteWhenQuiet sends an armed client's DELETE once the tree went
// quiet (its moment never came, or is this). It reports whether it did.
func (t *tree) deleteWhenQuiet() bool {
	d := t.del
	if d == nil || !d.armed {
		return false
	}
	d.armed = false
	t.addAction(action{at: t.now + 1 + int64(d.rng.IntN(3_000)), kind: actDelete})
	return true
}

// deleting reports whether the tree's client has sent its DELETE: the
// tree then gets no more work than its workload already planned.
func (t *tree) deleting() bool { return t.del != nil && t.del.sent }

// deleted reports whether the tree's delete committed.
func (t *tree) deleted() bool { return t.del != nil && t.del.committed }

// noteSent records a request as it goes to a guest: a DELETE as an
// attempt, any other request once a DELETE was sent.
func (t *tree) noteSent(r *request, g *guest) {
	d := t.del
	if d == nil {
		return
	}
	if t.ledger.Delete == nil {
		t.ledger.Delete = &check.Deletion{Trigger: d.trigger}
	}
	l := t.ledger.Delete
	if r.a.kind == actDelete {
		g.reopenRefused = false // a delete may close the instance again
		g.reopenDue = false     // it decides again whether a reopen follows
		if !d.sent {
			t.noteOvertaken(l)
		}
		d.sent, d.watching = true, true
		l.Attempts = append(l.Attempts, check.DeleteAttempt{At: t.now, Boot: g.boot})
		r.delEntry = len(l.Attempts)
		return
	}
	if d.sent {
		l.Requests = append(l.Requests, check.AfterDelete{At: t.now, Route: r.req.Method + " " + r.req.Path, AfterCommit: d.committed})
		r.delEntry = len(l.Requests)
	}
}

// noteOvertaken records the requests still out when the first DELETE is
// sent (a prompt waiting for a full disk, say): the delete may overtake
// them, and one it overtook is answered 404 once the delete committed
// (docs/api.md), so they are judged as the requests sent after the DELETE
// are, Overtaken, at the DELETE's time. In the order they were sent.
func (t *tree) noteOvertaken(l *check.Deletion) {
	var out []uint64
	for id, r := range t.reqs {
		if r.a.kind != actDelete && r.delEntry == 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	for _, id := range out {
		r := t.reqs[id]
		l.Requests = append(l.Requests, check.AfterDelete{At: t.now, Route: r.req.Method + " " + r.req.Path, Overtaken: true})
		r.delEntry = len(l.Requests)
	}
}

// onDeleteAnswer records a request's answer once a DELETE was sent (or
// was sent while the request was out). It reports whether the client is
// done with the request: a DELETE answered 204 or 404, any other request
// answered 404 (the tree is gone, or going: the checker holds a 404 to
// the delete's commit, check.AfterDelete), but a reply answered 404
// before any delete committed, which goes on to the replies' record.
func (t *tree) onDeleteAnswer(r *request) bool {
	if t.del == nil || r.delEntry == 0 {
		return false
	}
	l := t.ledger.Delete
	if r.a.kind == actDelete {
		a := &l.Attempts[r.delEntry-1]
		a.Status, a.Committed = r.status, t.del.committed
		// The guest's delete cleared the wake-up before it answered.
		a.WakeArmed = r.status == http.StatusNoContent && t.wake != 0 && r.to != nil && !r.to.zombie && !r.to.dead
		if r.status == http.StatusNoContent || r.status == http.StatusNotFound {
			t.del.done = true
			t.del.drop = t.del.rng.IntN(2) == 0
			return true
		}
		return false
	}
	a := &l.Requests[r.delEntry-1]
	a.Status, a.CommittedByAnswer = r.status, t.del.committed
	// A reply's 404 may also mean a question not asked yet (check's
	// replies judge that): only another route's 404 says the tree is gone.
	a.SaysGone = r.status == http.StatusNotFound && r.a.kind != actReply
	if r.a.kind == actReply && !t.del.committed {
		// No delete committed: the tree is there, so the 404 is the
		// reply's own, recorded (onReply) for the replies' rule, which
		// holds a question asked before the reply was sent to no 404.
		// Ended here, no rule would judge it.
		return false
	}
	return r.status == http.StatusNotFound
}

// beforeCommit runs before each COMMIT of g's while a DELETE is out: a
// transaction that removed the root session's row (as seen inside it)
// while the committed database still has it is the delete, and the
// committed database is copied as it stands, for the checker's rules of
// the run before the delete.
func (g *guest) beforeCommit() {
	t := g.t
	d := t.del
	if d == nil || !d.watching || d.committed {
		return
	}
	rows, err := g.conn.Query(`SELECT COUNT(*) FROM sessions WHERE id = ?`, []any{t.id})
	if err != nil || len(rows.Values) != 1 {
		return // not this transaction's business (or unreadable: judged once committed)
	}
	if n, _ := rows.Values[0][0].(int64); n != 0 || !t.rootCommitted() {
		return
	}
	if err := os.Remove(d.before); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.failf("copy the tree before its delete: %v", err)
		return
	}
	if err := t.obs.Exec(fmt.Sprintf(`VACUUM INTO '%s'`, strings.ReplaceAll(d.before, "'", "''"))); err != nil {
		t.failf("copy the tree before its delete: %v", err)
		return
	}
	d.copied = true
	if t.maybeFailDelete(g) {
		return // the kill aimed after the commit waits for one that stands
	}
	if d.aimAfter && g == t.cur {
		d.aimAfter = false
		d.plan = &plan{target: SiteKey{Import: abi.ImportSQLCommit, Phase: g.phase, After: true}, nth: 1, window: 1 << 30}
		g.plan = d.plan
	}
}

// rootCommitted reports whether the committed database holds the root
// session's row, read on the simulator's own connection.
func (t *tree) rootCommitted() bool {
	if !t.openObs("root session unreadable") {
		return false
	}
	s, _, err := t.obs.Prepare(`SELECT COUNT(*) FROM sessions WHERE id = ?`)
	if err != nil {
		t.notef("root session unreadable", "prepare: %v", err)
		return false
	}
	defer s.Close()
	if err := s.BindText(1, t.id); err != nil {
		t.notef("root session unreadable", "bind: %v", err)
		return false
	}
	if !s.Step() {
		t.notef("root session unreadable", "step: %v", s.Err())
		return false
	}
	return s.ColumnInt64(0) > 0
}

// afterCommit runs after each COMMIT of g's (reported failed or not)
// while a DELETE is out: once the root session's row is gone from the
// committed database, the delete committed.
func (g *guest) afterCommit() {
	t := g.t
	d := t.del
	if d == nil || !d.watching || d.committed || t.rootCommitted() {
		return
	}
	d.committed, d.prePos = true, t.logged
	l := t.ledger.Delete
	l.Committed, l.CommitAt, l.CommitBoot = true, t.now, g.boot
	l.Deliveries = len(t.ledger.Deliveries)
	if t.ledger.Emits != nil {
		l.Emitted = len(t.ledger.Emits.Events)
	}
	if !d.copied {
		t.failf("boot %d: the delete committed, but no copy of the tree before it was taken", g.boot)
	}
}

// noteEgressAfterDelete records an egress request started after the
// delete committed.
func (t *tree) noteEgressAfterDelete(g *guest, target string, kind abi.EgressKind) {
	if t.deleted() {
		t.ledger.Delete.Egress = append(t.ledger.Delete.Egress, fmt.Sprintf("boot %d at %d: %s (kind %d)", g.boot, t.now, target, kind))
	}
}

// noteWakeAfterDelete records a wake-up armed after the delete committed
// and a DELETE was answered 204 or 404: the guest then knows the tree is
// gone. Before that a guest whose delete's COMMIT was durable but
// reported failed takes the tree for still there, and rightly arms the
// wake-up that reopens it. A zombie's arm is not judged here: a
// superseded instance still running knows nothing of the delete its
// successor committed, as its writes are fenced rather than refused; the
// wake-up it arms boots the deleted tree, and that boot must find nothing
// to resume (noteBootAfterDelete).
func (t *tree) noteWakeAfterDelete(g *guest, at int64) {
	if t.deleted() && t.del.done && !g.zombie {
		t.ledger.Delete.WakeArms = append(t.ledger.Delete.WakeArms, fmt.Sprintf("boot %d at %d (phase %v): at %d", g.boot, t.now, g.phase, at))
	}
}

// noteBootAfterDelete records a boot after the delete committed and the
// claims it found.
func (t *tree) noteBootAfterDelete(g *guest) {
	if !t.deleted() || !t.openObs("claims unreadable") {
		return
	}
	b := check.BootAfterDelete{Boot: g.boot}
	if s, _, err := t.obs.Prepare(`SELECT COUNT(*) FROM claims`); err == nil {
		if s.Step() {
			b.Claims = int(s.ColumnInt64(0))
		}
		s.Close()
	}
	t.ledger.Delete.Boots = append(t.ledger.Delete.Boots, b)
}

// aimAtDelete makes the nemesis kill, one DELETE in two while the kill
// budget lasts, at the DELETE about to be sent: just before its first
// commit (the delete's, or one before it: the transaction rolls back, the
// tree stays, and the client's next DELETE must delete it), or just after
// the delete's own commit (armed when it is seen, beforeCommit: the tree
// is gone, the answer lost, and the next DELETE must find it gone).
func (t *tree) aimAtDelete(g *guest) {
	d := t.del
	if t.kills >= t.killBudget || d.rng.IntN(2) != 0 {
		return
	}
	if d.rng.IntN(2) == 0 {
		d.aimAfter = true
		return
	}
	d.plan = &plan{target: SiteKey{Import: abi.ImportSQLCommit, Phase: runtime.PhaseServe}, nth: 1, window: 1 << 30}
	g.plan = d.plan
}

// deleteSent ends a DELETE's call: a kill aimed at its commit that did
// not fire (nothing committed in the call) gives way to an ordinary one.
func (t *tree) deleteSent(g *guest) {
	if d := t.del; g.plan != nil && g.plan == d.plan {
		g.plan = nil
	}
	t.del.plan, t.del.aimAfter = nil, false
}

// dropDeleted is the host stopping a deleted tree's guest, now and then,
// once its DELETE was answered (between guest calls): the clients' later
// requests then boot a fresh guest over the emptied database, which must
// find nothing to resume and serve nothing of the tree.
func (t *tree) dropDeleted() {
	d := t.del
	if d == nil || !d.drop || d.dropped || t.cur == nil {
		return
	}
	d.dropped = true
	t.reap(t.cur)
}
