package check

import (
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/event"
)

// Some promises hold at every moment, not only at quiescence, and a later
// moment can hide that one was broken: a prompt stranded without its claim
// is re-claimed by the next admission; a claim left without a wake-up is
// swept by whatever boots the tree next. The host running the tree reads
// the database at those moments through a Probe and records what breaks
// them in its Ledger (Observed); Tree reports each as a violation.

// Observation is a violation seen at a moment of the run.
type Observation struct {
	At      int64  `json:"at"`   // virtual ms
	Boot    int    `json:"boot"` // the instance that had just acted
	Rule    Rule   `json:"rule"`
	Session string `json:"session,omitempty"`
	Detail  string `json:"detail"`
}

// Probe reads a live tree database, read-only, between the transactions of
// the instances that write it.
type Probe struct {
	c     *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt
}

// OpenProbe opens a probe on the tree database at path.
func OpenProbe(path string) (*Probe, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open probe: %w", err)
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro"}
	c, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	if err != nil {
		return nil, fmt.Errorf("open probe: %w", err)
	}
	return &Probe{c: c, stmts: map[string]*sqlite3.Stmt{}}, nil
}

// Close closes the probe.
func (p *Probe) Close() error {
	for _, s := range p.stmts {
		s.Close()
	}
	p.stmts = nil
	return p.c.Close()
}

// Unclaimed lists every prompt queued or running in a session without a
// claim row (DESIGN §6.1, §6.3): nothing would ever run or end it. It must
// be empty after every commit of a live instance: a terminal that releases
// the claim in one transaction and starts the next queued turn in another
// leaves exactly that in between. A session waiting for an answer (a
// pending blocker, DESIGN §9) is the one exception: its reply takes the
// claim.
func (p *Probe) Unclaimed() ([]Observation, error) {
	var out []Observation
	err := p.rows(`SELECT p.session_id, p.id, p.state FROM prompts p
		WHERE p.state IN ('queued', 'running') AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.session_id = p.session_id)
			AND NOT EXISTS (SELECT 1 FROM blockers b WHERE b.session_id = p.session_id AND b.state = 'pending')
		ORDER BY p.session_id, p.admitted_seq`, nil, func(s *sqlite3.Stmt) {
		out = append(out, Observation{Rule: RuleClaimed, Session: s.ColumnText(0),
			Detail: fmt.Sprintf("prompt %s is %s but its session has no claim", s.ColumnText(1), s.ColumnText(2))})
	})
	return out, err
}

// Claimed lists the claimed sessions.
func (p *Probe) Claimed() ([]string, error) {
	var out []string
	err := p.rows(`SELECT session_id FROM claims ORDER BY session_id`, nil, func(s *sqlite3.Stmt) { out = append(out, s.ColumnText(0)) })
	return out, err
}

// Parked lists the sessions waiting for an answer: a pending blocker (a
// question, a permission request, a child; DESIGN §9), held with no claim.
func (p *Probe) Parked() ([]string, error) {
	var out []string
	err := p.rows(`SELECT DISTINCT session_id FROM blockers WHERE state = 'pending' ORDER BY session_id`, nil, func(s *sqlite3.Stmt) { out = append(out, s.ColumnText(0)) })
	return out, err
}

// WakeDue lists every claim the tree's wake-up, armed at wake (ms; 0:
// none, which RuleWakeArmed judges), would bring back late at virtual
// time now, with the guest at rest: a claim sleeping on a provider retry
// due before the wake-up (DESIGN §4: the earliest retry is armed), or a
// claim not sleeping while the wake-up is more than one wake interval
// (ms) away.
func (p *Probe) WakeDue(wake, now, interval int64) ([]Observation, error) {
	var out []Observation
	if wake == 0 {
		return nil, nil
	}
	err := p.rows(`SELECT session_id, retry_at IS NOT NULL, COALESCE(retry_at, 0) FROM claims ORDER BY session_id`, nil, func(s *sqlite3.Stmt) {
		sid, sleeping, at := s.ColumnText(0), s.ColumnBool(1), s.ColumnInt64(2)
		switch {
		case sleeping && wake > at:
			out = append(out, Observation{Rule: RuleWakeDue, Session: sid,
				Detail: fmt.Sprintf("the wake-up is armed at %d, %d ms after the claim's retry is due (retry_at %d)", wake, wake-at, at)})
		case !sleeping && wake > now+interval:
			out = append(out, Observation{Rule: RuleWakeDue, Session: sid,
				Detail: fmt.Sprintf("the wake-up is armed %d ms ahead, more than the wake interval (%d ms), with the session claimed and not sleeping", wake-now, interval)})
		}
	})
	return out, err
}

// StrayRetries lists every claim sleeping on a retry (retry_at) that its
// execution did not schedule: no session.retry.scheduled@1 of the
// claim's execution names that time (RuleRetryOwned).
func (p *Probe) StrayRetries() ([]Observation, error) {
	var out []Observation
	err := p.rows(`SELECT c.session_id, COALESCE(c.execution_id, ''), c.retry_at FROM claims c
		WHERE c.retry_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e
			WHERE e.session_id = c.session_id AND e.type = ?1
				AND e.data ->> '$.execution_id' = c.execution_id AND e.data ->> '$.at' = c.retry_at)
		ORDER BY c.session_id`, []any{string(event.RetryScheduled)}, func(s *sqlite3.Stmt) {
		x := s.ColumnText(1)
		if x == "" {
			x = "(none)"
		}
		out = append(out, Observation{Rule: RuleRetryOwned, Session: s.ColumnText(0),
			Detail: fmt.Sprintf("the claim sleeps until %d, a retry its execution %s never scheduled", s.ColumnInt64(2), x)})
	})
	return out, err
}

// RetriesDue lists the claims sleeping on a retry due by now (ms), as
// "session (retry_at)".
func (p *Probe) RetriesDue(now int64) ([]string, error) {
	var out []string
	err := p.rows(`SELECT session_id, retry_at FROM claims WHERE retry_at IS NOT NULL AND retry_at <= ?1 ORDER BY session_id`, []any{now}, func(s *sqlite3.Stmt) {
		out = append(out, fmt.Sprintf("%s (%d)", s.ColumnText(0), s.ColumnInt64(1)))
	})
	return out, err
}

// Gseq is the tree's commit position: the highest events.gseq committed.
func (p *Probe) Gseq() (int64, error) {
	var n int64
	err := p.rows(`SELECT COALESCE(MAX(gseq), 0) FROM events`, nil, func(s *sqlite3.Stmt) { n = s.ColumnInt64(0) })
	return n, err
}

// Unswept lists every claim a boot that began at commit position since and
// returned at virtual time now left for later (DESIGN §6.5: the sweep runs
// before serving and defers nothing): one not sleeping on a retry still
// due, whose session saw no execution resumed, started or ended since.
// Swept lists the sessions whose execution that boot did resume or start.
func (p *Probe) Unswept(since, now int64) (unswept []Observation, swept []string, err error) {
	err = p.rows(`SELECT c.session_id, COALESCE(c.execution_id, ''), COALESCE(c.retry_at, 0),
			EXISTS (SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.gseq > ?1 AND e.type IN (?3, ?4)),
			EXISTS (SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.gseq > ?1 AND e.type IN (?5, ?6, ?7))
		FROM claims c ORDER BY c.session_id`,
		[]any{since, now, string(event.ExecutionStarted), string(event.ExecutionResumed),
			string(event.ExecutionSucceeded), string(event.ExecutionFailed), string(event.ExecutionInterrupted)},
		func(s *sqlite3.Stmt) {
			sid, exec, retryAt, started, ended := s.ColumnText(0), s.ColumnText(1), s.ColumnInt64(2), s.ColumnBool(3), s.ColumnBool(4)
			switch {
			case started:
				swept = append(swept, sid)
			case ended, retryAt > now:
			default:
				what := "execution " + exec + " is dead"
				if exec == "" {
					what = "no execution started"
				}
				unswept = append(unswept, Observation{Rule: RuleBootResumes, Session: sid,
					Detail: fmt.Sprintf("the boot returned with the session claimed (%s) and nothing resumed, started or ended", what)})
			}
		})
	return unswept, swept, err
}

// rows runs a cached query and calls row for each result row.
func (p *Probe) rows(query string, args []any, row func(*sqlite3.Stmt)) error {
	s, ok := p.stmts[query]
	if !ok {
		var err error
		if s, _, err = p.c.Prepare(query); err != nil {
			return fmt.Errorf("probe: prepare: %w", err)
		}
		p.stmts[query] = s
	}
	defer func() {
		s.Reset()
		s.ClearBindings()
	}()
	for i, a := range args {
		var err error
		switch v := a.(type) {
		case int64:
			err = s.BindInt64(i+1, v)
		case string:
			err = s.BindText(i+1, v)
		}
		if err != nil {
			return fmt.Errorf("probe: bind: %w", err)
		}
	}
	for s.Step() {
		row(s)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}
