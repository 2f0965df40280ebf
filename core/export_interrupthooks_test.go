package core

// SetInterruptCancelledHook makes f run whenever an interrupt request has
// told an execution to stop and let go of the claim lock, before it waits
// for the execution's end; the returned func removes it.
func SetInterruptCancelledHook(f func(cancelled *Execution)) (remove func()) {
	testHookInterruptCancelled = f
	return func() { testHookInterruptCancelled = nil }
}

// Ended is closed once x is no longer the session's execution here.
func (x *Execution) Ended() <-chan struct{} { return x.done }

// SetInterruptGraceUpHook makes f run whenever an interrupt request's grace
// period for an execution it told to stop ran out, before it takes the
// claim lock to commit directly; the returned func removes it.
func SetInterruptGraceUpHook(f func(x *Execution)) (remove func()) {
	testHookInterruptGraceUp = f
	return func() { testHookInterruptGraceUp = nil }
}
