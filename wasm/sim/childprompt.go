package sim

import "math/rand/v2"

// childSends counts a tree's prompts to children (workload.childPrompt).
type childSends struct {
	// task, parked and idle count them by the state of the child they
	// were sent to; dropped those that found no child to send to.
	task, parked, idle, dropped int
	// parentInterrupts and childInterrupts count the interrupts that
	// followed them.
	parentInterrupts, childInterrupts int
	// quietInterrupts counts the interrupts of a parked child whose
	// parent waits on it, sent when the tree went quiet (quietChild).
	quietInterrupts int
	// reservedRefused counts the prompts first sent under a notice's id
	// and refused (workload.childPrompt).
	reservedRefused int
}

// childWaits is how often a prompt to a child waits, a second each time,
// for a child in the state it prefers before it takes any child.
const childWaits = 4

// toChild picks the child a client's prompt to a child goes to, when it
// is first sent: the newest child in the state the prompt prefers, else,
// once it waited childWaits times, the newest child (none yet: it waits
// on, and is dropped in the end). It schedules the interrupt that follows
// the prompt, and reports false if the prompt is not sent now.
func (t *tree) toChild(a action) (action, bool) {
	id, parent, state := t.pickChild(a.child)
	if id == "" || (state != a.child && a.child != pickAny && a.waits < childWaits) {
		if a.waits < 2*childWaits {
			a.waits++
			a.at = t.now + 1_000
			t.addAction(a)
			return a, false
		}
		if id == "" {
			t.children.dropped++
			return a, false
		}
	}
	a.session = id
	switch state {
	case pickTask:
		t.children.task++
	case pickParked:
		t.children.parked++
	default:
		t.children.idle++
	}
	if a.follow > 0 {
		in := action{at: t.now + a.follow, kind: actInterrupt, session: parent}
		if a.followChild {
			in.session = id
			t.children.childInterrupts++
		} else {
			t.children.parentInterrupts++
		}
		t.addAction(in)
	}
	return a, true
}

// pickChild reads the tree's children on the simulator's own connection
// (what a client learns from the snapshot's children): the newest one in
// state want (pickAny: any), or else the newest one, with its parent and
// its state (pickAny: idle). "" if the tree has no child yet.
func (t *tree) pickChild(want childPick) (id, parent string, state childPick) {
	if !t.openObs("children unreadable") {
		return "", "", pickNone
	}
	s, _, err := t.obs.Prepare(`SELECT s.id, s.parent_id,
		EXISTS (SELECT 1 FROM blockers b WHERE b.session_id = s.id AND b.state = 'pending'),
		EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id AND p.state = 'running' AND p.client_id LIKE 'task-%')
		FROM sessions s WHERE s.parent_id IS NOT NULL ORDER BY s.created_at DESC, s.id DESC`)
	if err != nil {
		t.notef("children unreadable", "prepare: %v", err)
		return "", "", pickNone
	}
	defer s.Close()
	for s.Step() {
		st := pickAny
		switch {
		case s.ColumnBool(2):
			st = pickParked
		case s.ColumnBool(3):
			st = pickTask
		}
		if id == "" {
			id, parent, state = s.ColumnText(0), s.ColumnText(1), st
		}
		if st == want || want == pickAny {
			return s.ColumnText(0), s.ColumnText(1), st
		}
	}
	if err := s.Err(); err != nil {
		t.notef("children unreadable", "step: %v", err)
	}
	return id, parent, state
}

// quietChild is the client that, when its tree goes quiet, interrupts a
// child parked (on a question, a permission request or a child of its
// own) while its parent's turn waits on that child's task, instead of
// replying. Quiet means the tree's wake-up is used up: every session
// parked or idle, no claim, the last wake-up delivered, nothing due. The
// interrupt ends the child's turn, and its commit resolves the parent's
// task blocker, which hands the parent a claim: only a wake-up armed
// before that commit (DESIGN §4 rule 1) boots the tree again if the guest
// dies right after it, which the simulator checks after every commit
// (checkCommit). Replies, and the interrupts raced with them, mostly come
// while the tree is busy, with a wake-up still armed, so they rarely met
// it.
//
// The children come two ways: the client of a question of such a child
// decides, one time in quietPlanShare, not to reply but to interrupt the
// child once the tree went quiet (wanted); and a child still parked there
// (its question put off, or abandoned) is interrupted one time in
// quietChildShare.
type quietChild struct {
	rng    *rand.Rand
	seen   map[string]bool // children already considered, interrupted or not
	wanted map[string]bool // children whose question's client waits for quiescence to interrupt them
}

// quietPlanShare is the share (1 in it) of the questions of a child its
// parent waits on that the client leaves for an interrupt at quiescence.
const quietPlanShare = 3

// quietChildShare is the share of the other children parked at
// quiescence interrupted (1 in it), once each: the rest stay parked for a
// reply, or, abandoned, to the end, where the checker finds them visibly
// waiting.
const quietChildShare = 2

func newQuietChild(seed uint64, index int) quietChild {
	return quietChild{rng: stream(seed, keyQuietChild, index), seen: map[string]bool{}, wanted: map[string]bool{}}
}

// planQuietInterrupt decides whether the client of a question of child
// leaves it for an interrupt of the child at quiescence (only a child its
// parent's turn waits on): it reports whether it does.
func (t *tree) planQuietInterrupt(child string) bool {
	if t.quiet.seen[child] {
		return false // interrupted already (or left to a reply): replied to as ever
	}
	if t.quiet.wanted[child] {
		return true // another question of the child's while it waits: the same client
	}
	if t.quiet.rng.IntN(quietPlanShare) != 0 {
		return false
	}
	for _, c := range t.parkedWaitedOn() {
		if c == child {
			t.quiet.wanted[child] = true
			return true
		}
	}
	return false
}

// interruptQuietChild schedules, at quiescence, an interrupt of a child
// parked while its parent waits on its task: a wanted one, or else the
// newest not yet considered, one time in quietChildShare. It reports
// whether it did.
func (t *tree) interruptQuietChild() bool {
	var id string
	for _, c := range t.parkedWaitedOn() {
		if t.quiet.seen[c] {
			continue
		}
		if t.quiet.wanted[c] {
			id = c
			break
		}
		if id == "" {
			id = c
		}
	}
	if id == "" {
		return false
	}
	t.quiet.seen[id] = true
	if !t.quiet.wanted[id] && t.quiet.rng.IntN(quietChildShare) != 0 {
		return false
	}
	t.children.quietInterrupts++
	t.addAction(action{at: t.now + clientRetry + int64(t.quiet.rng.IntN(4_000)), kind: actInterrupt, session: id})
	return true
}

// parkedWaitedOn reads, on the simulator's own connection, the children
// parked (with a pending blocker of their own) while their parent has a
// pending task blocker naming them, newest first.
func (t *tree) parkedWaitedOn() []string {
	if !t.created || !t.openObs("parked children unreadable") {
		return nil
	}
	s, _, err := t.obs.Prepare(`SELECT c.id FROM sessions c
		WHERE c.parent_id IS NOT NULL
		AND EXISTS (SELECT 1 FROM blockers b WHERE b.session_id = c.id AND b.state = 'pending')
		AND EXISTS (SELECT 1 FROM blockers tb WHERE tb.session_id = c.parent_id AND tb.kind = 'task'
			AND tb.state = 'pending' AND json_extract(tb.request, '$.child_id') = c.id)
		ORDER BY c.created_at DESC, c.id DESC`)
	if err != nil {
		t.notef("parked children unreadable", "prepare: %v", err)
		return nil
	}
	defer s.Close()
	var ids []string
	for s.Step() {
		ids = append(ids, s.ColumnText(0))
	}
	if err := s.Err(); err != nil {
		t.notef("parked children unreadable", "step: %v", err)
	}
	return ids
}
