package core

// testHooks are an instance's test hooks: each runs at a moment a race
// can land that no test could otherwise reach. Only core's tests set them
// (export_test.go, export_interrupthooks_test.go), on the instance under
// test, so a test's hooks never fire on another test's instance; outside
// those tests none is set. They live on the instance, not at package level
// (DESIGN §16: no package-level mutable state in core). Guarded by the
// instance's mu: a test sets a hook on a running instance, whose
// executions may read the hooks at that moment.
type testHooks struct {
	// finishing runs in finish after it read how the execution ended and
	// before it takes the claim lock: the moment an interrupt can cancel
	// an execution that finish will still record as it ended.
	finishing execHook
	// interruptAsked runs once an interrupt request has noted itself on
	// the execution it tells to stop.
	interruptAsked execHook
	// interruptCancelled runs once an interrupt request has told an
	// execution to stop and let go of the claim lock, before it waits for
	// the execution's end: a moment at which that end can begin its
	// record, which no other hook reaches (see askedFirst).
	interruptCancelled execHook
	// interruptGraceUp runs once an interrupt request's grace period for
	// an execution it told to stop ran out, before it takes the claim lock
	// to commit directly: the execution can end in between, with the
	// request past the select that would have seen it end.
	interruptGraceUp execHook
	// interruptStopped runs once an interrupt request has seen an
	// execution it told to stop end, before it reads what that end left to
	// stop.
	interruptStopped execHook
}

// testHooks returns the test hooks set on inst: none, outside core's tests.
func (inst *Instance) testHooks() testHooks {
	inst.mu.Lock()
	h := inst.hooks
	inst.mu.Unlock()
	return h
}

// execHook is one test hook, nil when unset.
type execHook func(*Execution)

// run calls the hook with x, if one is set.
func (h execHook) run(x *Execution) {
	if h != nil {
		h(x)
	}
}
