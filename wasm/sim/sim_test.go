package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
)

// cacheDir keeps the guest's compiled code between test runs: compiling it
// costs seconds, running a small campaign not much more.
func cacheDir(t *testing.T) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "revenant", "wazero")
}

// A small campaign, part of make test: the real guest, killed at host
// calls in every phase, with zombies and disk-full windows, keeps every
// invariant.
//
// The seed is chosen so that this small campaign reaches every case the
// test asserts below (each count is positive): with the generators' keys
// of session 53 (streams.go) seed 1 no longer does (no turn fails model
// once its retries are spent), and of seeds 1 to 36 only 8, 10, 15, 19,
// 21, 24, 31 and 32 reach them all. 10 is among the cheapest (1548 driver
// steps and 112 boots, where seed 1 took 1855 and 122 before) and is not
// at the edge of the case seed 1 lost: five turns give up retrying. A
// change to what the simulator draws changes the history of every seed;
// if one then fails here for want of a case, pick another the same way.
func TestSmallCampaignKeepsTheInvariants(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 10, Sessions: 10, Kills: 100, Zombies: 0.5, DiskFull: 0.3, Scripted: 0.5, Dir: t.TempDir(), CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	var out bytes.Buffer
	res.Print(&out)
	t.Log("\n" + out.String())
	assert.Empty(t, res.Violations)
	assert.Equal(t, 100, res.Hist.Kills(), "the kill budget is spent")
	for _, u := range res.Hist.Uncovered() {
		assert.True(t, strings.HasPrefix(u, "import "), "every phase and side is killed at, even in a small campaign: %s", u)
	}
	assert.Contains(t, out.String(), "violations: 0\n")
	assert.True(t, bytes.HasSuffix(out.Bytes(), []byte("violations: 0\n")), "the summary ends with the violation count")

	// Questions are asked, answered, cancelled and raced (a 409 names the
	// winner), and killed right after a reply's commit.
	var answered, cancelled, continued, conflicts, commitKills int
	for _, s := range res.Sessions {
		answered += s.Check.Answered
		cancelled += s.Check.Cancelled
		continued += s.Check.Continued
		commitKills += s.ReplyCommitKills
		for _, r := range s.Ledger.Replies {
			if r.Status == http.StatusConflict {
				conflicts++
			}
		}
	}
	assert.Positive(t, answered, "questions answered")
	assert.Positive(t, cancelled, "questions cancelled")
	assert.Positive(t, continued, "turns continued from their answers")
	assert.Positive(t, conflicts, "replies refused 409")
	assert.Positive(t, commitKills, "kills right after a reply's commit")

	// Sub-agents run in the foreground and the background: foreground
	// calls get their child's result, background children's notices
	// arrive, and some parents end before their child.
	var children, background, notices, taskResults, orphaned int
	for _, s := range res.Sessions {
		children += s.Check.Children
		background += s.Check.Background
		notices += s.Check.Notices
		taskResults += s.Check.TaskResults
		orphaned += s.Check.Orphaned
	}
	// Clients try a notice's id for their prompts to children: refused.
	assert.Regexp(t, `under a notice's id, refused [1-9]`, out.String())
	assert.Positive(t, children-background, "foreground children")
	assert.Positive(t, background, "background children")
	assert.Positive(t, notices, "background notices")
	assert.Positive(t, taskResults, "foreground calls resolved by their child")
	assert.Positive(t, orphaned, "jobs ended with their parent's turn, before their child")

	// Children ask too: their questions and permission requests are
	// listed on the root's path (tree-wide), answered there or on the
	// child's, and their parents wait on them.
	var childQuestions, childAnswered, childReplies int
	for _, s := range res.Sessions {
		childQuestions += s.Check.ChildQuestions
		childAnswered += s.Check.ChildAnswered
		for _, r := range s.Ledger.Replies {
			if strings.Contains(r.Session, ".") && r.Status == http.StatusOK {
				childReplies++
			}
		}
	}
	assert.Positive(t, childQuestions, "questions and permission requests of children")
	assert.Positive(t, childAnswered, "children's questions answered or approved")
	assert.Positive(t, childReplies, "replies on a child's path answered 200")

	// Clients send children prompts of their own (judged by
	// child-own-prompt-kept), and the scripted model's steps ask for
	// several calls.
	var childPrompts, multi int
	for _, s := range res.Sessions {
		childPrompts += s.Check.ChildPrompts
		multi += s.Check.MultiCallSteps
	}
	assert.Positive(t, childPrompts, "prompts clients sent children")
	assert.Positive(t, multi, "steps with several tool calls")

	// The scripted model fails retryably: turns sleep on scheduled
	// retries (judged by retry-not-early, retry-budget and
	// wake-before-due), and some give up once their step's budget is spent.
	var providerFails, retries, gaveUp int
	for _, s := range res.Sessions {
		providerFails += s.ProviderFails
		retries += s.Check.Retries
		gaveUp += s.Check.RetriesGaveUp
	}
	assert.Positive(t, providerFails, "provider failures answered")
	assert.Positive(t, retries, "retries scheduled")
	assert.Positive(t, gaveUp, "turns that failed model once their retries were spent")

	// Permission requests are asked, approved (once or always) and
	// rejected (plainly or with a message), and approved calls reach their
	// receiver: the checker's body-after-approval rule judged them.
	replies := map[string]int{}
	var approvedDeliveries int
	for _, s := range res.Sessions {
		for _, r := range s.Ledger.Replies {
			if strings.HasPrefix(r.Question, "p-") && r.Status == http.StatusOK {
				var body struct{ Reply, Message string }
				require.NoError(t, json.Unmarshal([]byte(r.Body), &body))
				replies[body.Reply+map[bool]string{true: "+message"}[body.Message != ""]]++
			}
		}
		for _, d := range s.Ledger.Deliveries {
			if d.Tool == "ahook" {
				approvedDeliveries++
			}
		}
	}
	t.Logf("permission replies answered 200: %v; approved calls delivered: %d", replies, approvedDeliveries)
	assert.Positive(t, replies["once"]+replies["always"], "permission requests approved")
	assert.Positive(t, replies["reject"]+replies["reject+message"], "permission requests rejected")
	assert.Positive(t, approvedDeliveries, "approved calls ran")

	// The nemesis does all it is meant to: zombies live on after their
	// successor booted (given inputs, more than one each on the whole),
	// some superseded at an egress start; disk-full trees meet late IOERRs
	// too; kills land on both sides of host calls in numbers, not only
	// where a plan's window ran out.
	var zombies, zombieCalls, midCall, lateIOErrs int
	for _, s := range res.Sessions {
		zombies += s.Zombies
		zombieCalls += s.ZombieCalls
		midCall += s.MidCall
		lateIOErrs += s.LateIOErrs
	}
	assert.Positive(t, zombies, "zombies")
	assert.Greater(t, zombieCalls, zombies, "inputs given to zombies after their successor booted")
	assert.Positive(t, midCall, "zombies superseded at an egress start")
	assert.Positive(t, lateIOErrs, "commits durable but reported failed")
	var before, after int
	for k, v := range res.Hist {
		if k.After {
			after += v.Kills
		} else {
			before += v.Kills
		}
	}
	assert.GreaterOrEqual(t, 4*before, res.Hist.Kills(), "kills before the operation: %d of %d", before, res.Hist.Kills())
	assert.GreaterOrEqual(t, 4*after, res.Hist.Kills(), "kills after the operation: %d of %d", after, res.Hist.Kills())

	// The clients do all they are meant to: some replace a running turn,
	// some walk away from a question; the ledger holds the prompts
	// accepted and the interrupts answered, which the checker judges.
	var superseded, abandoned, accepted, prompts, interrupts int
	for _, s := range res.Sessions {
		superseded += s.Check.Ends["interrupted:superseded"]
		abandoned += s.Abandoned
		accepted += len(s.Ledger.Accepted)
		prompts += s.Check.Prompts
		interrupts += len(s.Ledger.Interrupts)
	}
	assert.Positive(t, superseded, "turns replaced by a prompt in replace mode")
	assert.Positive(t, abandoned, "questions never replied to")
	assert.Positive(t, accepted, "prompts accepted")
	assert.LessOrEqual(t, accepted, prompts, "accepted prompts are in the log")
	assert.Positive(t, interrupts, "interrupts answered")
}

// The same seed gives the same history, byte for byte, whatever the number
// of workers; another seed gives another.
func TestSameSeedSameHistory(t *testing.T) {
	wasm := guestbuild.Must(t)
	run := func(seed uint64, workers int) *sim.Result {
		cfg := sim.Config{Seed: seed, Sessions: 4, Kills: 40, Zombies: 1, DiskFull: 0.5, Workers: workers, Dir: t.TempDir(), CacheDir: cacheDir(t)}
		res, err := sim.Run(context.Background(), cfg, wasm)
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		return res
	}
	a, b := run(7, 1), run(7, 2)
	assert.Equal(t, a.Hash, b.Hash, "seed 7 on one worker and on two")
	for i := range a.Sessions {
		assert.Equal(t, a.Sessions[i].Hash, b.Sessions[i].Hash, "session %d", i)
		assert.Equal(t, a.Sessions[i].Hist, b.Sessions[i].Hist, "session %d's kill sites", i)
	}
	assert.NotEqual(t, a.Hash, run(8, 2).Hash, "another seed")
}

// A tree whose disk fills must meet the full disk: its windows open while
// it has writes to make, not after its workload went quiet.
func TestDiskFullWindowsFailWrites(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 3, Sessions: 8, Kills: 40, DiskFull: 1, Dir: t.TempDir(), CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	for _, s := range res.Sessions {
		require.Positive(t, s.DiskFulls, "session %d", s.Index)
		assert.Positive(t, s.FailedWrites, "session %d: %d windows of a full disk failed no write", s.Index, s.DiskFulls)
	}
}

// A campaign reports its progress as sessions end: sessions done, kills
// and violations so far, the last line at the end.
func TestProgressIsReported(t *testing.T) {
	wasm := guestbuild.Must(t)
	var out bytes.Buffer
	cfg := sim.Config{Seed: 2, Sessions: 3, Kills: 6, Workers: 1, Dir: t.TempDir(), CacheDir: cacheDir(t), Progress: &out}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "one line per session: a tenth of 3 is less than one")
	assert.Contains(t, lines[0], "simulate: seed 2: 1/3 sessions, ")
	assert.Contains(t, lines[2], fmt.Sprintf("3/3 sessions, %d kills, %d violations so far", res.Hist.Kills(), len(res.Violations)))
}

// At the default budget (10) no turn of a campaign reaches it; at 2 some
// do, so the rules of a budget reached (the count past it aborts at once,
// a resume within it is never given up) are exercised in make test.
func TestSmallBudgetCampaignKeepsTheInvariants(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.DefaultConfig(1)
	cfg.Sessions, cfg.Kills, cfg.ResumeBudget = 12, 240, 2
	cfg.Dir, cfg.CacheDir = t.TempDir(), cacheDir(t)
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	var out bytes.Buffer
	res.Print(&out)
	t.Log("\n" + out.String())
	assert.Empty(t, res.Violations)
	aborted := 0
	for _, s := range res.Sessions {
		aborted += s.Check.Ends["failed:aborted"]
	}
	assert.Positive(t, aborted, "some turn reached the budget of 2")
}

// A tree with boot faults has its disk fail right after a boot's sweep
// listed the claims, so a recovery's write waits for storage within the
// boot: the boot must serve all the same (wasm/guest bootResult), and the
// wake-up recovers once the disk works. A boot that fails there is a
// violation of the run (RuleSimulation).
func TestBootFaultsMeetABootsSweep(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 7, Sessions: 3, Kills: 30, BootFault: 1, Workers: 1, Dir: t.TempDir(), CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	faults := 0
	for _, s := range res.Sessions {
		faults += s.BootFaults
	}
	assert.Positive(t, faults, "no boot's sweep met a fault")
	var out bytes.Buffer
	res.Print(&out)
	assert.Contains(t, out.String(), fmt.Sprintf("boot faults (share 1.00): %d windows", faults))
}

// The same with another connection holding the write lock instead
// (-bootlock): every boot that met one served. Without the guest's cut
// (ebef664) such boots end "blocked before it finished": the sweep's
// recovery waits on core's write schedule for the lock, on a timer no boot
// export fires. Some windows open before a boot's session listing, which
// the guest must serve past too (wasm/guest watchListed): without them
// (maybeListingLock) no campaign reaches that path. Once storage refused
// nothing through a sweep, such trees' wake-ups are judged on their due
// time again (wakeDueExcused).
func TestBootLocksMeetABootsSweep(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 7, Sessions: 3, Kills: 30, BootLock: 1, Workers: 1, Dir: t.TempDir(), CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	var locks, served, busy, listings, listingsServed, reopens, judged int
	for _, s := range res.Sessions {
		locks += s.BootLocks
		served += s.BootLocksServed
		busy += s.Busy
		listings += s.BootLockListings
		listingsServed += s.BootLockListingsServed
		reopens += s.BootLockReopens
		judged += s.BootLockWakeDueJudged
	}
	assert.Positive(t, locks, "no boot's sweep met another connection's lock")
	assert.Positive(t, served, "no boot that met one served")
	assert.Positive(t, listingsServed, "no boot whose session listing met the lock served")
	assert.Greater(t, locks, listings, "no window opened in a boot's sweep")
	assert.Positive(t, judged, "no wake-up judged on its due time once a tree met a lock (checkWakeDue)")
	var out bytes.Buffer
	res.Print(&out)
	assert.Contains(t, out.String(), fmt.Sprintf("boot locks (share 1.00): %d windows of another connection's write lock taken in a boot's sweep, after its listing, or before its session listing; boots that met one and served %d; guest transactions refused busy %d\n", locks, served, busy))
	assert.Contains(t, out.String(), fmt.Sprintf("  of those, session listings refused %d (%d of them a reopen's), boots that met one there and served %d; wake-ups judged on their due time after a window %d\n", listings, reopens, listingsServed, judged))
}

// cancelOnWrite cancels a context at its first write (a progress line).
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return len(p), nil
}

// An interrupted campaign (Ctrl-C, SIGTERM) starts no more sessions and
// says so: the sessions the interrupt cut fail, and their failures are
// not the guest's violations. Here it is interrupted as its first session
// ends.
func TestInterruptedCampaignJudgesNoCutSession(t *testing.T) {
	wasm := guestbuild.Must(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := sim.Config{Seed: 2, Sessions: 4, Kills: 6, Workers: 1, Dir: t.TempDir(), CacheDir: cacheDir(t), Progress: cancelOnWrite{cancel}}
	res, err := sim.Run(ctx, cfg, wasm)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, res)
	assert.Contains(t, err.Error(), "interrupted after 1 of 4 sessions (0 violations among them")
}
