package core

// SetInterruptCancelledHook makes f run whenever an interrupt request on
// inst has told an execution to stop and let go of the claim lock, before
// it waits for the execution's end; the returned func removes it.
func SetInterruptCancelledHook(inst *Instance, f func(cancelled *Execution)) (remove func()) {
	return inst.setHook(func(h *testHooks) *execHook { return &h.interruptCancelled }, f)
}

// Ended is closed once x is no longer the session's execution here.
func (x *Execution) Ended() <-chan struct{} { return x.done }

// SetInterruptGraceUpHook makes f run whenever an interrupt request on
// inst finds the grace period for an execution it told to stop ran out,
// before it takes the claim lock to commit directly; the returned func
// removes it.
func SetInterruptGraceUpHook(inst *Instance, f func(x *Execution)) (remove func()) {
	return inst.setHook(func(h *testHooks) *execHook { return &h.interruptGraceUp }, f)
}
