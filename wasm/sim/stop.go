package sim

import (
	"context"
	"math/rand/v2"
)

// A host stops an instance gracefully too, not only by a crash: a deploy,
// an idle eviction, a server shutting down (wasm/runtime/serve's
// Tree.Close: Shutdown, then Close). DESIGN §6 has a graceful stop record
// interrupted{reason:"shutdown"}, keep the claim (also for a prompt queued
// behind the stopped turn, which the next boot starts without counting a
// resume), and leave the same durable state a crash would. The kill plans
// never take that path, so a bug in it (a stopping instance that releases
// a claim a queued prompt needs, say) went unseen.
//
// In a stopped tree (Config.Stops) about half the kill plans that fire
// stop the guest gracefully instead: the host call the plan fired at goes
// on, and once the input the guest was given returns (the driver's next
// step, at the same virtual time) the host stops it as serve's Close does,
// at the moment the kill would have come: in a step (a model request or
// its word timers pending), in a tool call (its webhook in flight), at
// rest with a turn parked (a question, a permission request or a child
// pending), or otherwise at rest. Its successor
// boots as after a kill: when the wake-up fires or a client sends again
// what the stopped guest never answered. The checker judges the tree as
// any other: nothing lost or doubled, every turn ends.

// stopper decides which fired kill plans of a tree become graceful stops,
// on a generator of its own (keyStops), so the option changes nothing
// else a tree draws.
type stopper struct {
	rng *rand.Rand
	// stops counts the graceful stops by the moment they came at:
	// stopStep, stopTool, stopParked, stopIdle.
	stops [stopMoments]int
	// chosen counts the fired kill plans stopInstead turned into stops,
	// whether or not a stop came of them: a later plan of the same input
	// may kill the guest first, or choose a stop already due. None of them
	// killed a guest (SessionResult.Kills).
	chosen int
}

// Moments of a graceful stop (stopper.stops).
const (
	stopStep    = iota // a model request or a step's timers pending
	stopTool           // a tool's webhook in flight
	stopParked         // neither, with a turn parked on a pending blocker
	stopIdle           // neither, and nothing parked
	stopMoments        // how many
)

// stopNames name the moments in the trace and the report.
var stopNames = [stopMoments]string{"in a step", "in a tool call", "parked", "otherwise at rest"}

// stopsFor is session i's stopper (nil: its guests are only killed).
func (c Config) stopsFor(i int) *stopper {
	if c.Stops == 0 {
		return nil
	}
	rng := stream(c.Seed, keyStops, i)
	if rng.Float64() >= c.Stops {
		return nil
	}
	return &stopper{rng: rng}
}

// stopInstead reports whether the kill plan that fired at guest g now
// stops it gracefully instead: g then runs on to the end of its input,
// and maybeStop stops it.
func (t *tree) stopInstead(g *guest) bool {
	if t.stop == nil || g != t.cur || g.zombie || t.stop.rng.IntN(2) != 0 {
		return false
	}
	g.stopDue = true
	t.stop.chosen++
	return true
}

// maybeStop stops the serving guest gracefully if a kill plan chose it
// (stopInstead), between two inputs: Shutdown, then Close, as
// wasm/runtime/serve's Tree.Close does. What it never answered its
// clients send again, and its successor boots as after a kill.
func (t *tree) maybeStop(ctx context.Context) {
	g := t.cur
	if g == nil || !g.stopDue || g.dead || g.zombie {
		return
	}
	g.stopDue = false
	moment := stopIdle
	if p := t.probeOf(); p != nil && t.created {
		if parked, err := p.Parked(); err == nil && len(parked) > 0 {
			moment = stopParked
		}
	}
	for _, r := range g.egress {
		if r.tool {
			moment = stopTool
			break
		}
		moment = stopStep
	}
	if moment >= stopParked && len(g.timers) > 0 {
		moment = stopStep
	}
	t.stop.stops[moment]++
	t.tracef("%s stopped gracefully (%s)", g.name(), stopNames[moment])
	if t.call(ctx, g, func() error { return g.g.Shutdown(ctx) }) {
		t.died(g)
	}
}
