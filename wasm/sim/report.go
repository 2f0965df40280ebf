package sim

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Print writes the campaign's summary. Its last line is "violations: N";
// before it come the first violations (with seed, session and first bad
// event), the history hash and the kill-site histogram.
func (r *Result) Print(w io.Writer) {
	var boots, kills, zombies, midCall, zombieCalls, diskFulls, failedWrites, lateIOErrs, steps, prompts, resumes, calls, deliveries, applied, events int
	var latencies []int64
	var questions, answered, cancelled, continued, listings, replyKills, commitKills int
	var children, background, notices, taskResults, orphaned int
	var childQuestions, childAnswered, waitingOnChild, alwaysRules, abandoned int
	var kids childSends
	var kidPrompts, kidOK, multi, scripted, providerFails, retries, gaveUp, wakeStarts, wakeFaulted int
	replies := map[string]int{}
	ends := map[string]int{}
	byTool := map[string]int{}
	var small, smallAborted, bootFaults, bootLocks, faultsServed, locksServed, busy int
	var lockListings, lockListingsServed, lockReopens, lockJudged int
	var stops [stopMoments]int
	var stopped, allStops int
	var delFaults, delFaulted, delReopens, delReopenListings, reopenRaces, floods, fellBehind int
	for _, s := range r.Sessions {
		if b := s.Ledger.Budget; b > 0 && b < 3 && r.Config.ResumeBudget == 0 {
			small++
			smallAborted += s.Check.Ends["failed:aborted"]
		}
		boots += s.Boots
		for m, n := range s.Stops {
			stops[m] += n
			allStops += n
		}
		if s.Stops != [stopMoments]int{} {
			stopped++
		}
		kills += s.Kills
		zombies += s.Zombies
		zombieCalls += s.ZombieCalls
		midCall += s.MidCall
		diskFulls += s.DiskFulls
		bootFaults += s.BootFaults
		bootLocks += s.BootLocks
		faultsServed += s.BootFaultsServed
		locksServed += s.BootLocksServed
		lockListings += s.BootLockListings
		lockListingsServed += s.BootLockListingsServed
		lockReopens += s.BootLockReopens
		lockJudged += s.BootLockWakeDueJudged
		delFaults += s.DeleteFaults
		if s.DeleteFaults > 0 {
			delFaulted++
		}
		delReopens += s.DeleteReopens
		delReopenListings += s.DeleteReopenListings
		reopenRaces += s.ReopenRaces
		floods += s.Floods
		fellBehind += s.FellBehind
		busy += s.Busy
		failedWrites += s.FailedWrites
		lateIOErrs += s.LateIOErrs
		steps += s.Steps
		latencies = append(latencies, s.ResumeLatencies...)
		prompts += s.Check.Prompts
		resumes += s.Check.Resumes
		calls += s.Check.Calls
		events += s.Check.Events
		deliveries += len(s.Ledger.Deliveries)
		for _, d := range s.Ledger.Deliveries {
			byTool[d.Tool]++
			if d.Applied {
				applied++
			}
		}
		for k, v := range s.Check.Ends {
			ends[k] += v
		}
		questions += s.Check.Questions
		answered += s.Check.Answered
		cancelled += s.Check.Cancelled
		continued += s.Check.Continued
		listings += len(s.Ledger.Listings)
		children += s.Check.Children
		background += s.Check.Background
		notices += s.Check.Notices
		taskResults += s.Check.TaskResults
		orphaned += s.Check.Orphaned
		childQuestions += s.Check.ChildQuestions
		childAnswered += s.Check.ChildAnswered
		waitingOnChild += s.Check.WaitingOnChild
		alwaysRules += s.Check.AlwaysRules
		abandoned += s.Abandoned
		cs := s.ChildSends
		kids.task += cs.task
		kids.parked += cs.parked
		kids.idle += cs.idle
		kids.dropped += cs.dropped
		kids.parentInterrupts += cs.parentInterrupts
		kids.childInterrupts += cs.childInterrupts
		kids.quietInterrupts += cs.quietInterrupts
		kids.reservedRefused += cs.reservedRefused
		kidPrompts += s.Check.ChildPrompts
		kidOK += s.Check.ChildPromptsOK
		multi += s.Check.MultiCallSteps
		if s.Scripted {
			scripted++
		}
		providerFails += s.ProviderFails
		retries += s.Check.Retries
		gaveUp += s.Check.RetriesGaveUp
		wakeStarts += s.Check.WakeStarts
		wakeFaulted += s.Check.WakeStartsFaulted
		replyKills += s.ReplyKills
		commitKills += s.ReplyCommitKills
		for _, r := range s.Ledger.Replies {
			replies[fmt.Sprint(r.Status)]++
		}
	}
	c := r.Config
	fmt.Fprintf(w, "simulate: seed %d, %d sessions, kill budget %d, zombie share %.2f, disk-full share %.2f, wall %s\n",
		c.Seed, c.Sessions, c.Kills, c.Zombies, c.DiskFull, r.Wall.Round(1e7))
	if small > 0 {
		fmt.Fprintf(w, "resume budgets: %d sessions with a small one (1 or 2), their turns aborted for it %d\n", small, smallAborted)
	}
	fmt.Fprintf(w, "kills %d, boots %d, driver steps %d; zombies %d (%d superseded at an egress start), given %d inputs after their successor booted\n",
		kills, boots, steps, zombies, midCall, zombieCalls)
	fmt.Fprintf(w, "disk-full windows %d, writes failed in them %d, late IOERRs (commits durable but reported failed) %d\n", diskFulls, failedWrites, lateIOErrs)
	if c.Stops > 0 {
		fmt.Fprintf(w, "graceful stops (share %.2f): %d guests stopped (Shutdown, then Close) in %d trees:", c.Stops, allStops, stopped)
		for m, n := range stops {
			sep := ","
			if m == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %d %s", sep, n, stopNames[m])
		}
		fmt.Fprintln(w)
	}
	if c.BootFault > 0 {
		fmt.Fprintf(w, "boot faults (share %.2f): %d windows of failed writes opened in a boot's sweep, after its listing; boots that met one and served %d\n", c.BootFault, bootFaults, faultsServed)
	}
	if c.BootLock > 0 {
		fmt.Fprintf(w, "boot locks (share %.2f): %d windows of another connection's write lock taken in a boot's sweep, after its listing, or before its session listing; boots that met one and served %d; guest transactions refused busy %d\n", c.BootLock, bootLocks, locksServed, busy)
		fmt.Fprintf(w, "  of those, session listings refused %d (%d of them a reopen's), boots that met one there and served %d; wake-ups judged on their due time after a window %d\n", lockListings, lockReopens, lockListingsServed, lockJudged)
	}
	if c.DeleteFault > 0 {
		fmt.Fprintf(w, "delete faults (share %.2f of the deleted trees): %d delete commits refused after the close, in %d trees; reopens after them %d, of those session listings refused %d\n", c.DeleteFault, delFaults, delFaulted, delReopens, delReopenListings)
		if c.ReopenRace > 0 {
			fmt.Fprintf(w, "  reopen races (share %.2f of those reopens): %d successors booted within a reopen, before its epoch\n", c.ReopenRace, reopenRaces)
		}
	}
	if c.Flood > 0 {
		fmt.Fprintf(w, "floods (share %.2f of the scripted prompts): %d answers streamed in %d events in one call, of those whose watch fell behind (fewer live deltas emitted) %d\n", c.Flood, floods, floodEvents, fellBehind)
	}
	fmt.Fprintf(w, "events %d, prompts %d (%s), resumes %d\n", events, prompts, counts(ends), resumes)
	p50, p99, most := percentiles(latencies)
	fmt.Fprintf(w, "resume latency after boots (virtual ms, from the death to the boot that took the claim up): %d claims, p50 %d, p99 %d, max %d\n",
		len(latencies), p50, p99, most)
	fmt.Fprintf(w, "tool calls %d; deliveries %d (%s), %d applied\n", calls, deliveries, counts(byTool), applied)
	fmt.Fprintf(w, "questions %d (answered %d, cancelled %d, continued %d); listings %d; replies by status: %s; kills in a reply %d, right after its commit %d\n",
		questions, answered, cancelled, continued, listings, counts(replies), replyKills, commitKills)
	fmt.Fprintf(w, "sub-agents %d (background %d); background notices %d; foreground calls resolved by their child %d; jobs ended before their child (parent ended) %d\n",
		children, background, notices, taskResults, orphaned)
	fmt.Fprintf(w, "children's questions and permission requests %d (answered or approved %d); never replied to %d; turns left waiting on a child that waits for an answer %d; always rules saved %d\n",
		childQuestions, childAnswered, abandoned, waitingOnChild, alwaysRules)
	fmt.Fprintf(w, "clients' own prompts to children %d (sent while its task turn ran %d, while it was parked %d, otherwise %d; no child to send to %d); followed by an interrupt of the parent %d, of the child %d; succeeded %d\n",
		kidPrompts, kids.task, kids.parked, kids.idle, kids.dropped, kids.parentInterrupts, kids.childInterrupts, kidOK)
	fmt.Fprintf(w, "interrupts of a parked child whose parent waits on it, when the tree went quiet %d; prompts to children under a notice's id, refused %d\n", kids.quietInterrupts, kids.reservedRefused)
	fmt.Fprintf(w, "sessions on the scripted model %d; steps with several tool calls %d\n", scripted, multi)
	fmt.Fprintf(w, "provider failures answered %d; retries scheduled %d; turns that gave up retrying (failed model) %d\n", providerFails, retries, gaveUp)
	fmt.Fprintf(w, "executions a wake-up started for a claim its instance had taken %d (after a storage fault since the claim %d)\n", wakeStarts, wakeFaulted)
	if c.Deletes > 0 {
		printDeletes(w, r.Sessions)
	}
	notes := map[string]Note{}
	for _, s := range r.Sessions {
		for k, n := range s.Notes {
			m, seen := notes[k]
			if !seen {
				m.Example = fmt.Sprintf("seed %d session %d: %s", c.Seed, s.Index, n.Example)
			}
			m.Count += n.Count
			notes[k] = m
		}
	}
	for _, k := range slices.Sorted(maps.Keys(notes)) {
		fmt.Fprintf(w, "note: %s: %d (first: %s)\n", k, notes[k].Count, notes[k].Example)
	}
	r.Hist.Print(w)
	fmt.Fprintf(w, "history: %s\n", r.Hash)
	if len(r.Violations) > 0 {
		byRule := map[string]int{}
		for _, v := range r.Violations {
			byRule[string(v.Rule)]++
		}
		fmt.Fprintf(w, "violations by rule: %s\n", counts(byRule))
	}
	const shown = 20
	for i, v := range r.Violations {
		if i == shown {
			fmt.Fprintf(w, "  … and %d more\n", len(r.Violations)-shown)
			break
		}
		fmt.Fprintf(w, "  %s\n", v)
	}
	fmt.Fprintf(w, "violations: %d\n", len(r.Violations))
}

func counts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// printDeletes is the summary's line of the trees deleted (delete.go).
func printDeletes(w io.Writer, sessions []SessionResult) {
	trees, committed, after, afterGone, boots := 0, 0, 0, 0, 0
	triggers, answers := map[string]int{}, map[string]int{}
	for _, s := range sessions {
		d := s.Ledger.Delete
		if d == nil {
			continue
		}
		trees++
		triggers[d.Trigger]++
		if d.Committed {
			committed++
		}
		for _, a := range d.Attempts {
			answers[fmt.Sprint(a.Status)]++
		}
		for _, q := range d.Requests {
			if q.AfterCommit {
				after++
				if q.Status == http.StatusNotFound {
					afterGone++
				}
			}
		}
		boots += len(d.Boots)
	}
	fmt.Fprintf(w, "deleted trees %d (%s), their deletes committed %d; DELETEs by answer (0: killed first): %s; requests after a commit %d (answered 404 %d); boots after a commit %d\n",
		trees, counts(triggers), committed, counts(answers), after, afterGone, boots)
}
