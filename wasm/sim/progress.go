package sim

import (
	"fmt"
	"time"
)

// progress reports a running campaign on Config.Progress: a long one
// (thousands of sessions, tens of thousands of kills) runs for many minutes.
// Wall time decides only when a line is printed, never what is simulated.
type progress struct {
	cfg        Config
	began      time.Time
	last       time.Time
	every      time.Duration
	step       int // sessions between lines
	n          int
	kills      int
	violations int
}

func newProgress(cfg Config, began time.Time) *progress {
	every := cfg.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	return &progress{cfg: cfg, began: began, last: began, every: every, step: max(1, cfg.Sessions/10)}
}

// done counts a finished session and prints a line when one is due.
func (p *progress) done(r *SessionResult) {
	p.n++
	p.kills += r.Kills
	p.violations += len(r.Check.Violations) + len(r.Failures)
	if p.cfg.Progress == nil {
		return
	}
	now := time.Now()
	if p.n%p.step != 0 && p.n != p.cfg.Sessions && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	fmt.Fprintf(p.cfg.Progress, "simulate: seed %d: %d/%d sessions, %d kills, %d violations so far (%s)\n",
		p.cfg.Seed, p.n, p.cfg.Sessions, p.kills, p.violations, now.Sub(p.began).Round(time.Second))
}
