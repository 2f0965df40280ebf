package check

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
)

// The rules of a deleted tree (DELETE /v1/sessions/{root}; docs/api.md).
// Once a DELETE was answered 204, or its delete committed, the tree is
// gone for good: every request sent after the commit is answered 404, no
// delivery or egress of the tree starts after it, no boot finds work to
// resume, and its wake-up, cleared by the delete, is not armed again
// (deleted-stays-gone); a DELETE is answered 204 only once its
// delete committed, and 404 only once an earlier attempt's did, and any
// other request out since the first DELETE (a request the delete
// overtook included) says the tree is gone (404) only once a delete
// committed (delete-answer-true); and the database holds none of the tree's rows
// (deleted-tree-empty). Before the delete every other rule holds, judged
// on the database as it was just before the delete's commit (DeletedTree).
const (
	RuleDeleteGone   Rule = "deleted-stays-gone"
	RuleDeleteAnswer Rule = "delete-answer-true"
	RuleDeleteEmpty  Rule = "deleted-tree-empty"
)

// Deletion is what the clients and the host saw of a tree's deletion: the
// DELETEs sent, the commit that deleted the tree (the root session's row
// gone from the committed database), and what the tree did after it.
type Deletion struct {
	// Trigger says when the client chose to delete (for reports).
	Trigger string `json:"trigger,omitempty"`
	// Attempts are the DELETEs sent, in order, with their answers.
	Attempts []DeleteAttempt `json:"attempts,omitempty"`
	// Committed is set once the host saw the delete's commit: at CommitAt
	// (virtual ms), by boot CommitBoot.
	Committed  bool  `json:"committed,omitempty"`
	CommitAt   int64 `json:"commit_at,omitempty"`
	CommitBoot int   `json:"commit_boot,omitempty"`
	// Deliveries and Emitted are how many deliveries (Ledger.Deliveries)
	// and emitted events (Ledger.Emits.Events) there were when the delete
	// committed: every one after them started after the commit.
	Deliveries int `json:"deliveries,omitempty"`
	Emitted    int `json:"emitted,omitempty"`
	// Requests are the clients' other requests sent once the first DELETE
	// was, with their answers.
	Requests []AfterDelete `json:"requests,omitempty"`
	// Egress are the egress requests (of any kind) the tree started
	// after the commit.
	Egress []string `json:"egress,omitempty"`
	// Boots are the boots of the tree after the commit, with the claims
	// each found (work to resume).
	Boots []BootAfterDelete `json:"boots,omitempty"`
	// WakeArms are the wake-ups the tree armed after the commit, once a
	// DELETE was answered 204 or 404: a deleted tree's wake-up is cleared
	// (docs/abi.md §6) and stays so.
	WakeArms []string `json:"wake_arms,omitempty"`
}

// DeleteAttempt is one DELETE sent: when, to which boot, its answer
// (Status 0: none came, its instance died first), and whether the delete
// had committed by the answer (or by the instance's death).
type DeleteAttempt struct {
	At        int64 `json:"at"`
	Boot      int   `json:"boot"`
	Status    int   `json:"status,omitempty"`
	Committed bool  `json:"committed,omitempty"`
	// WakeArmed: answered 204 with the tree's wake-up still armed (the
	// delete clears it before its answer).
	WakeArmed bool `json:"wake_armed,omitempty"`
}

// AfterDelete is a request sent once a DELETE was, or still out when the
// first DELETE was sent (Overtaken; At is then the DELETE's time): its
// route, when it was sent, whether the delete had committed by then, and
// its answer (0: none), with whether the delete had committed by the
// answer. SaysGone: the answer is a 404 that says the tree is gone (a
// reply's 404 may mean a question not asked yet): once a delete committed,
// and never before, since a tree still there is never "not found".
type AfterDelete struct {
	At                int64  `json:"at"`
	Route             string `json:"route"`
	Overtaken         bool   `json:"overtaken,omitempty"`
	AfterCommit       bool   `json:"after_commit,omitempty"`
	Status            int    `json:"status,omitempty"`
	CommittedByAnswer bool   `json:"committed_by_answer,omitempty"`
	SaysGone          bool   `json:"says_gone,omitempty"`
}

// BootAfterDelete is a boot of the tree after its delete committed and the
// claims it found.
type BootAfterDelete struct {
	Boot   int `json:"boot"`
	Claims int `json:"claims,omitempty"`
}

// DeletedTree checks a tree whose client deleted it (ledger.Delete set):
// the rules of the run before the delete on before, the database as it
// was just before the delete's commit ("" when none committed: then path
// is judged whole), with the rules that only hold once the tree went
// quiet left out (Options.Cut: the delete cut the tree's work short); and
// the rules of a deleted tree on path, the database at the end, and the
// ledger.
func DeletedTree(path, before string, ledger *Ledger, opts Options) (Result, error) {
	d := ledger.Delete
	if d == nil {
		return Tree(path, ledger, opts)
	}
	judged, l := path, ledger
	if before != "" {
		judged, l = before, ledger.beforeDelete()
		opts.Cut = true
	}
	res, err := Tree(judged, l, opts)
	if err != nil {
		return res, err
	}
	if opts.Label == "" {
		opts.Label = path
	}
	vs, err := DeleteRules(path, ledger, opts.Label)
	if err != nil {
		return res, err
	}
	res.Violations = append(res.Violations, vs...)
	return res, nil
}

// beforeDelete is l without what came after its delete's commit: the
// deliveries and emits of a deleted tree are judged by the delete's rules.
func (l *Ledger) beforeDelete() *Ledger {
	d := l.Delete
	if d == nil || !d.Committed {
		return l
	}
	c := *l
	c.Deliveries = l.Deliveries[:min(d.Deliveries, len(l.Deliveries))]
	if l.Emits != nil {
		e := *l.Emits
		e.Events = e.Events[:min(d.Emitted, len(e.Events))]
		c.Emits = &e
	}
	return &c
}

// DeleteRules judges a deleted tree's database at path (which may be
// gone, as a host removes it) and its ledger by the rules of a deleted
// tree. A tree nobody deleted breaks none.
func DeleteRules(path string, l *Ledger, label string) ([]Violation, error) {
	d := l.Delete
	if d == nil {
		return nil, nil
	}
	var vs []Violation
	fail := func(rule Rule, format string, args ...any) {
		vs = append(vs, Violation{Tree: label, Rule: rule, Detail: fmt.Sprintf(format, args...)})
	}
	final := false
	for i, a := range d.Attempts {
		switch a.Status {
		case http.StatusNoContent:
			final = true
			if !a.Committed {
				fail(RuleDeleteAnswer, "DELETE #%d (sent at %d to boot %d) was answered 204, but no delete had committed", i+1, a.At, a.Boot)
			}
			if a.WakeArmed {
				fail(RuleDeleteGone, "DELETE #%d (sent at %d to boot %d) was answered 204 with the tree's wake-up still armed", i+1, a.At, a.Boot)
			}
		case http.StatusNotFound:
			final = true
			if !a.Committed {
				fail(RuleDeleteAnswer, "DELETE #%d (sent at %d to boot %d) was answered 404, but no delete had committed: the tree is still there", i+1, a.At, a.Boot)
			}
		}
	}
	if !final {
		fail(RuleDeleteAnswer, "no DELETE of %d was answered 204 or 404", len(d.Attempts))
	}
	for _, r := range d.Requests {
		if r.AfterCommit && r.Status != 0 && r.Status != http.StatusNotFound {
			fail(RuleDeleteGone, "%s sent at %d, after the delete committed at %d, was answered %d, not 404", r.Route, r.At, d.CommitAt, r.Status)
		}
		if r.SaysGone && !r.CommittedByAnswer {
			fail(RuleDeleteAnswer, "%s (%s at %d) was answered 404, but no delete had committed: the tree is still there", r.Route, sentWhen(r), r.At)
		}
	}
	if d.Committed {
		for _, dl := range l.Deliveries[min(d.Deliveries, len(l.Deliveries)):] {
			fail(RuleDeleteGone, "%s call %s (boot %d) reached its receiver at %d, after the delete committed at %d", dl.Tool, dl.CallID, dl.Boot, dl.At, d.CommitAt)
		}
		if l.Emits != nil {
			for _, e := range l.Emits.Events[min(d.Emitted, len(l.Emits.Events)):] {
				fail(RuleDeleteGone, "boot %d emitted %s #%d of %s after the delete committed at %d", e.Boot, e.Type, e.Seq, e.Session, d.CommitAt)
			}
		}
	}
	for _, e := range d.Egress {
		fail(RuleDeleteGone, "egress started after the delete committed at %d: %s", d.CommitAt, e)
	}
	for _, w := range d.WakeArms {
		fail(RuleDeleteGone, "wake-up armed after the delete committed at %d: %s", d.CommitAt, w)
	}
	for _, b := range d.Boots {
		if b.Claims > 0 {
			fail(RuleDeleteGone, "boot %d, after the delete committed at %d, found %d claim(s): work to resume", b.Boot, d.CommitAt, b.Claims)
		}
	}
	left, err := rowsLeft(path)
	if err != nil {
		return nil, err
	}
	for _, t := range left {
		fail(RuleDeleteEmpty, "table %s still holds %d row(s) of the deleted tree", t.table, t.rows)
	}
	return vs, nil
}

type tableRows struct {
	table string
	rows  int64
}

// rowsLeft counts the rows of every table of the database at path but the
// bookkeeping a delete keeps (the tree's epoch, the schema's version);
// none when the file is gone.
func rowsLeft(path string) ([]tableRows, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	c, err := openReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s, _, err := c.Prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('tree', 'schema_migrations') ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("rows left in %s: %w", path, err)
	}
	var names []string
	for s.Step() {
		names = append(names, s.ColumnText(0))
	}
	err = s.Err()
	s.Close()
	if err != nil {
		return nil, fmt.Errorf("rows left in %s: %w", path, err)
	}
	var out []tableRows
	for _, n := range names {
		q, _, err := c.Prepare(`SELECT COUNT(*) FROM "` + n + `"`)
		if err != nil {
			return nil, fmt.Errorf("rows left in %s: %w", path, err)
		}
		var k int64
		if q.Step() {
			k = q.ColumnInt64(0)
		}
		err = q.Err()
		q.Close()
		if err != nil {
			return nil, fmt.Errorf("rows left in %s: %w", path, err)
		}
		if k > 0 {
			out = append(out, tableRows{table: n, rows: k})
		}
	}
	return out, nil
}

// sentWhen says how a request relates to the DELETE it is judged against.
func sentWhen(r AfterDelete) string {
	if r.Overtaken {
		return "out when the first DELETE was sent"
	}
	return "sent"
}
