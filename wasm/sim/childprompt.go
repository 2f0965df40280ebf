package sim

// childSends counts a tree's prompts to children (workload.childPrompt).
type childSends struct {
	// task, parked and idle count them by the state of the child they
	// were sent to; dropped those that found no child to send to.
	task, parked, idle, dropped int
	// parentInterrupts and childInterrupts count the interrupts that
	// followed them.
	parentInterrupts, childInterrupts int
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
