package sim

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// errKill is what Interpose returns to kill a guest at a host call.
var errKill = errors.New("sim: killed by the nemesis")

// SiteKey is one kill-site category: an import, before or after its
// operation, in a phase.
type SiteKey struct {
	Import string
	Phase  runtime.Phase
	After  bool
}

// SiteCount is how often a site category was passed and killed at.
type SiteCount struct {
	Seen  int
	Kills int
}

// Histogram counts sites and kills by category.
type Histogram map[SiteKey]SiteCount

func (h Histogram) add(o Histogram) {
	for k, v := range o {
		c := h[k]
		c.Seen += v.Seen
		c.Kills += v.Kills
		h[k] = c
	}
}

// Kills is the total number of kills.
func (h Histogram) Kills() int {
	n := 0
	for _, v := range h {
		n += v.Kills
	}
	return n
}

// Uncovered lists what no kill hit: each import that was passed, each
// phase, before and after. The default campaign must leave it empty.
func (h Histogram) Uncovered() []string {
	imports, phases, sides := map[string]int{}, map[runtime.Phase]int{}, map[bool]int{}
	for k, v := range h {
		imports[k.Import] += v.Kills
		phases[k.Phase] += v.Kills
		sides[k.After] += v.Kills
	}
	var out []string
	for _, imp := range slices.Sorted(maps.Keys(imports)) {
		if imports[imp] == 0 {
			out = append(out, "import "+imp)
		}
	}
	for _, p := range []runtime.Phase{runtime.PhaseBoot, runtime.PhaseSweep, runtime.PhaseServe} {
		if phases[p] == 0 {
			out = append(out, "phase "+p.String())
		}
	}
	for _, after := range []bool{false, true} {
		if sides[after] == 0 {
			out = append(out, side(after))
		}
	}
	return out
}

func side(after bool) string {
	if after {
		return "after"
	}
	return "before"
}

var phases = []runtime.Phase{runtime.PhaseBoot, runtime.PhaseSweep, runtime.PhaseServe}

// Print writes the histogram: one row per import, kills before/after in
// each phase, then totals by phase and side.
func (h Histogram) Print(w io.Writer) {
	byImport := map[string]map[SiteKey]SiteCount{}
	for k, v := range h {
		if byImport[k.Import] == nil {
			byImport[k.Import] = map[SiteKey]SiteCount{}
		}
		byImport[k.Import][k] = v
	}
	fmt.Fprintf(w, "kill sites (kills before/after the operation; sites passed in brackets):\n")
	fmt.Fprintf(w, "  %-14s %22s %22s %22s\n", "import", "boot", "sweep", "serve")
	for _, imp := range slices.Sorted(maps.Keys(byImport)) {
		var cells []string
		for _, p := range phases {
			b, a := h[SiteKey{imp, p, false}], h[SiteKey{imp, p, true}]
			cells = append(cells, fmt.Sprintf("%d/%d [%d]", b.Kills, a.Kills, b.Seen+a.Seen))
		}
		fmt.Fprintf(w, "  %-14s %22s %22s %22s\n", imp, cells[0], cells[1], cells[2])
	}
	var byPhase [4]int
	var bySide [2]int
	for k, v := range h {
		if int(k.Phase) < len(byPhase) {
			byPhase[k.Phase] += v.Kills
		}
		if k.After {
			bySide[1] += v.Kills
		} else {
			bySide[0] += v.Kills
		}
	}
	fmt.Fprintf(w, "  by phase: boot %d, sweep %d, serve %d; by side: before %d, after %d\n",
		byPhase[runtime.PhaseBoot], byPhase[runtime.PhaseSweep], byPhase[runtime.PhaseServe], bySide[0], bySide[1])
	if u := h.Uncovered(); len(u) > 0 {
		fmt.Fprintf(w, "  never killed at: %s\n", strings.Join(u, ", "))
	}
}

// plan is the kill armed on one guest: at the nth site of the target
// category, or, if that never comes, at the window-th site of any kind, so
// the kill happens as long as the guest still makes host calls. Targets are chosen evenly
// over the imports seen in that phase before (not by frequency), so rare
// imports (a rollback, a cleared wake-up) are killed at too.
type plan struct {
	target SiteKey
	any    bool // the target's import is any import
	nth    int
	window int
	hits   int
	sites  int
}

// newPlan arms a kill. A guest about to boot may be killed in any phase;
// one already serving (its earlier plan spent) only where it still goes:
// serving, or sweeping on a wake-up. seen is what the tree's guests passed
// so far, per phase. Now and then the plan is a long rest, so turns also
// make progress between kills.
func newPlan(rng *rand.Rand, seen map[runtime.Phase][]string, booting bool) *plan {
	p := &plan{nth: 1 + rng.IntN(2), window: 1 + rng.IntN(2000)}
	r := rng.IntN(10)
	switch {
	case booting && r < 3:
		p.target.Phase = runtime.PhaseBoot
	case booting && r < 6, !booting && r < 3:
		p.target.Phase = runtime.PhaseSweep
	default:
		p.target.Phase = runtime.PhaseServe
	}
	p.target.After = rng.IntN(2) == 1
	if imps := seen[p.target.Phase]; len(imps) > 0 {
		p.target.Import = imps[rng.IntN(len(imps))]
	} else {
		p.any = true
	}
	switch {
	case !frequent[p.target.Import]:
		// A rare import (a started or cancelled egress, a response, a
		// rollback, an armed wake-up) may not come for thousands of sites:
		// wait for it longer, or it would hardly ever be killed at.
		p.window *= 10
	case rng.IntN(4) == 0:
		p.window = 2000 + rng.IntN(8000)
	}
	return p
}

// frequent are the imports a serving guest calls all the time.
var frequent = map[string]bool{"": true, abi.ImportClockNow: true, abi.ImportSQLBegin: true, abi.ImportSQLExec: true,
	abi.ImportSQLQuery: true, abi.ImportSQLCommit: true, abi.ImportTimerSet: true, abi.ImportTimerClear: true, abi.ImportEmit: true}

// at reports whether the guest dies at site s.
func (p *plan) at(s runtime.Site) bool {
	p.sites++
	if s.Phase == p.target.Phase && s.After == p.target.After && (p.any || s.Import == p.target.Import) {
		p.hits++
		if p.hits >= p.nth {
			return true
		}
	}
	return p.sites >= p.window
}
